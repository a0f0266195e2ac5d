#pragma once
// XXH3 for long inputs (a chat message, a rendered text run: kilobytes to
// megabytes), on x86-64 through libxxhash's runtime dispatch
// (xxh_x86dispatch.h, shipped by Debian's libxxhash-dev): the library picks
// its AVX2 or AVX-512 loop for the CPU it runs on, where plain XXH3_128bits
// runs the SSE2 loop the library was compiled for. Same hash on every path
// (XXH3's results do not depend on the vector width). Short keys keep
// <xxhash.h> (the dispatch only pays off on long inputs).

#include <xxhash.h>

#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif
