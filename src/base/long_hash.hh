#pragma once
// XXH3 for long inputs (a chat message, a rendered text run: kilobytes to
// megabytes), through libxxhash's x86 runtime dispatch where the library has
// it (xxh_x86dispatch.h; Debian's libxxhash-dev does, upstream's default build
// and the WrapDB fallback do not: meson.build checks and defines
// IC_XXH_X86_DISPATCH): the library picks its AVX2 or AVX-512 loop for the CPU
// it runs on, where plain XXH3_128bits runs the SSE2 loop the library was
// compiled for. Same hash on every path (XXH3's results do not depend on the
// vector width). Short keys keep <xxhash.h> (the dispatch only pays off on
// long inputs).

#include <xxhash.h>

#if defined(IC_XXH_X86_DISPATCH)
#include <xxh_x86dispatch.h>
#endif
