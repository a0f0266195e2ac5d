// A link probe (tests/layout/meson.build): linked with one library's
// dependency only, so its link line is that library's link closure.
int main() { return 0; }
