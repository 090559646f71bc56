/* test_new.cc — C++ operator new/delete in every form: plain, array, sized, aligned, nothrow (owner: tests suite).
 * Checks alignment, usable memory, that a huge request throws std::bad_alloc (nothrow forms return
 * nullptr), that the new-handler is called before giving up, and, under hakmem, that the memory comes
 * from hakmem. Exit status 0 when every check passed. */
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <new>
#include <vector>

#include "tcheck.h"

static std::size_t hide(std::size_t n) {
  volatile std::size_t v = n;
  return v;
}

typedef std::size_t (*usable_fn)(const void *);
static usable_fn hak_usable;

/* Common checks on a block of n bytes that must be aligned to `align`. */
static void check_block(const char *form, void *p, std::size_t n, std::size_t align) {
  REQUIRE(p != nullptr, "%s(%zu) returned nullptr", form, n);
  CHECK(((uintptr_t)p & (align - 1)) == 0, "%s(%zu) = %p is not %zu-aligned", form, n, p, align);
  if (hak_usable) CHECK(hak_usable(p) >= n, "%s(%zu): hak_usable_size = %zu (not a hakmem block?)", form, n, hak_usable(p));
  std::memset(p, 0x6b, n);
}

static const std::size_t sizes[] = {1, 16, 100, 1000, 5000, 100000, 600000, 3u << 20};

static void check_plain_forms() {
  tc_section("operator new / new[] and every delete form");
  for (std::size_t n : sizes) {
    std::size_t align = n >= 16 ? 16 : 8;
    void *p = ::operator new(hide(n));
    check_block("operator new", p, n, align);
    ::operator delete(p);
    p = ::operator new(hide(n));
    check_block("operator new", p, n, align);
    ::operator delete(p, n);
    p = ::operator new[](hide(n));
    check_block("operator new[]", p, n, align);
    ::operator delete[](p);
    p = ::operator new[](hide(n));
    check_block("operator new[]", p, n, align);
    ::operator delete[](p, n);
    p = ::operator new(hide(n), std::nothrow);
    check_block("operator new(nothrow)", p, n, align);
    ::operator delete(p, std::nothrow);
    p = ::operator new[](hide(n), std::nothrow);
    check_block("operator new[](nothrow)", p, n, align);
    ::operator delete[](p, std::nothrow);
  }
  void *z1 = ::operator new(hide(0)), *z2 = ::operator new(hide(0));
  CHECK(z1 != nullptr && z2 != nullptr && z1 != z2, "operator new(0) twice: %p and %p, expected unique non-null", z1,
        z2);
  ::operator delete(z1);
  ::operator delete(z2);
}

static void check_aligned_forms() {
  tc_section("aligned operator new / new[] (align 16 .. 4 MiB) and every aligned delete form");
  for (std::size_t align = 16; align <= (4u << 20); align *= 2) {
    std::align_val_t al = static_cast<std::align_val_t>(align);
    for (std::size_t n : {std::size_t(1), std::size_t(24), align, align + 1, std::size_t(3u << 20)}) {
      void *p = ::operator new(hide(n), al);
      check_block("operator new(align)", p, n, align);
      ::operator delete(p, al);
      p = ::operator new(hide(n), al);
      check_block("operator new(align)", p, n, align);
      ::operator delete(p, n, al);
      p = ::operator new[](hide(n), al);
      check_block("operator new[](align)", p, n, align);
      ::operator delete[](p, al);
      p = ::operator new[](hide(n), al);
      check_block("operator new[](align)", p, n, align);
      ::operator delete[](p, n, al);
      p = ::operator new(hide(n), al, std::nothrow);
      check_block("operator new(align, nothrow)", p, n, align);
      ::operator delete(p, al, std::nothrow);
      p = ::operator new[](hide(n), al, std::nothrow);
      check_block("operator new[](align, nothrow)", p, n, align);
      ::operator delete[](p, al, std::nothrow);
    }
  }
  struct alignas(4096) Page {
    unsigned char bytes[4096];
  };
  std::unique_ptr<Page[]> pages(new Page[7]);
  CHECK(((uintptr_t)pages.get() & 4095) == 0, "new Page[7] with alignas(4096) = %p", (void *)pages.get());
  std::memset(pages.get(), 1, sizeof(Page) * 7);
}

/* True if the symbol the process resolves `name` to lives in libhakmem. */
static bool provided_by_hakmem(const char *name) {
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, name);
  return sym && dladdr(sym, &info) && info.dli_fname && std::strstr(info.dli_fname, "libhakmem");
}

static int handler_calls;
static void counting_handler() {
  handler_calls++;
  std::set_new_handler(nullptr); /* the next failure throws */
}

static int throwing_calls;
static void throwing_handler() {
  throwing_calls++;
  throw std::bad_alloc();
}

template <typename F> static bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc &) {
    return true;
  }
  return false;
}

static void check_failures() {
  tc_section("huge requests: std::bad_alloc, nothrow returns nullptr, new-handler called");
  const std::size_t huge_sizes[] = {SIZE_MAX, SIZE_MAX / 2 + 1, std::size_t(1) << 62, std::size_t(1) << 47};
  /* libstdc++'s own aligned new rounds the size up to the alignment without an overflow check, so
   * SIZE_MAX is checked on the aligned forms only when the library under test provides them. */
  bool aligned_max = provided_by_hakmem("_ZnwmSt11align_val_t");
  printf("   aligned operator new provided by %s\n", aligned_max ? "hakmem" : "libstdc++");
  for (std::size_t n : huge_sizes) {
    n = hide(n);
    CHECK(throws_bad_alloc([&] { ::operator delete(::operator new(n)); }), "operator new(%zu) did not throw", n);
    CHECK(throws_bad_alloc([&] { ::operator delete[](::operator new[](n)); }), "operator new[](%zu) did not throw", n);
    void *p = ::operator new(n, std::nothrow);
    CHECK(p == nullptr, "operator new(%zu, nothrow) returned %p", n, p);
    p = ::operator new[](n, std::nothrow);
    CHECK(p == nullptr, "operator new[](%zu, nothrow) returned %p", n, p);
    if (n > SIZE_MAX - 4096 && !aligned_max) continue;
    CHECK(throws_bad_alloc([&] { ::operator delete(::operator new(n, std::align_val_t(64)), std::align_val_t(64)); }),
          "operator new(%zu, align 64) did not throw", n);
    CHECK(throws_bad_alloc([&] {
            ::operator delete[](::operator new[](n, std::align_val_t(4096)), std::align_val_t(4096));
          }),
          "operator new[](%zu, align 4096) did not throw", n);
    p = ::operator new(n, std::align_val_t(256), std::nothrow);
    CHECK(p == nullptr, "operator new(%zu, align 256, nothrow) returned %p", n, p);
    p = ::operator new[](n, std::align_val_t(256), std::nothrow);
    CHECK(p == nullptr, "operator new[](%zu, align 256, nothrow) returned %p", n, p);
  }
  std::size_t count = hide(SIZE_MAX / 4);
  CHECK(throws_bad_alloc([&] { delete[] new long long[count]; }), "new long long[SIZE_MAX/4] did not throw");
  CHECK(throws_bad_alloc([&] { std::vector<char> v; v.reserve(hide(std::size_t(1) << 62)); }),
        "vector::reserve(1 << 62) did not throw");

  handler_calls = 0;
  std::set_new_handler(counting_handler);
  CHECK(throws_bad_alloc([&] { ::operator delete(::operator new(hide(std::size_t(1) << 62))); }),
        "operator new(1 << 62) with a new-handler did not throw");
  CHECK_EQ(handler_calls, 1, "new-handler calls before operator new threw");
  handler_calls = 0;
  std::set_new_handler(counting_handler);
  void *p = ::operator new(hide(std::size_t(1) << 62), std::nothrow);
  CHECK(p == nullptr, "operator new(1 << 62, nothrow) with a new-handler returned %p", p);
  CHECK_EQ(handler_calls, 1, "new-handler calls before operator new(nothrow) gave up");

  /* A new-handler may throw std::bad_alloc: the nothrow forms return nullptr (they used to let the
   * exception escape, and the program terminated), the others pass it on. */
  throwing_calls = 0;
  std::set_new_handler(throwing_handler);
  std::size_t big = hide(std::size_t(1) << 62);
  p = ::operator new(big, std::nothrow);
  CHECK(p == nullptr, "operator new(nothrow) with a throwing new-handler returned %p", p);
  p = ::operator new[](big, std::nothrow);
  CHECK(p == nullptr, "operator new[](nothrow) with a throwing new-handler returned %p", p);
  p = ::operator new(big, std::align_val_t(256), std::nothrow);
  CHECK(p == nullptr, "operator new(align, nothrow) with a throwing new-handler returned %p", p);
  p = ::operator new[](big, std::align_val_t(256), std::nothrow);
  CHECK(p == nullptr, "operator new[](align, nothrow) with a throwing new-handler returned %p", p);
  CHECK(throws_bad_alloc([&] { ::operator delete(::operator new(big)); }),
        "operator new with a throwing new-handler did not throw");
  CHECK_EQ(throwing_calls, 5, "throwing new-handler calls");
  std::set_new_handler(nullptr);
}

static void check_containers() {
  tc_section("standard containers");
  std::vector<std::vector<int>> vv;
  for (int i = 0; i < 2000; i++) {
    vv.emplace_back(std::size_t(i % 300 + 1), i);
    if (i % 3 == 0) vv[std::size_t(i / 2)].resize(std::size_t(i % 700 + 1), -i);
  }
  long bad = 0;
  for (std::size_t i = 0; i < vv.size(); i++)
    for (std::size_t k = 0; k < vv[i].size() && k < std::size_t(i % 300 + 1); k++)
      if (vv[i][k] != int(i)) bad++;
  CHECK_EQ(bad, 0, "vector elements that changed");
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  bool hakmem = tc_hakmem_active();
  printf("allocator: %s\n", hakmem ? "hakmem" : "glibc");
  if (hakmem) hak_usable = reinterpret_cast<usable_fn>(dlsym(RTLD_DEFAULT, "hak_usable_size"));
  check_plain_forms();
  check_aligned_forms();
  check_failures();
  check_containers();
  return tc_finish("test_new");
}
