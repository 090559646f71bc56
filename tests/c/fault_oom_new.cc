// fault_oom_new.cc — C++ allocation failure under an address-space limit: with RLIMIT_AS lowered to
// (address space in use) + HEADROOM, operator new (plain, array, aligned) must throw std::bad_alloc and the
// nothrow forms must return nullptr; the blocks obtained stay intact, and after deleting them allocation
// works again. Huge requests (vector::reserve, new[] with an overflowing count) throw as well.
// Exit 0 when every check passes. Usage: fault_oom_new [HEADROOM_MIB]. Run by tests/test_robust.py.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace {

constexpr size_t kMiB = size_t(1) << 20;
size_t headroom;
void **slots;
size_t slot_cap;
int failures;

void check(bool ok, const char *scenario, const char *what) {
  if (!ok) {
    std::printf("FAIL %s: %s\n", scenario, what);
    failures++;
  }
}

size_t vm_size_bytes() {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return std::strtoull(buf, nullptr, 10) * size_t(sysconf(_SC_PAGESIZE));
}

enum class Form { Throwing, Nothrow, Aligned };

// One allocation; nullptr means it failed the way the form must fail (exception or nullptr).
void *allocate(Form form, size_t size, const char *name) {
  switch (form) {
  case Form::Throwing:
    try {
      return new unsigned char[size];
    } catch (const std::bad_alloc &) {
      return nullptr;
    }
  case Form::Nothrow:
    return new (std::nothrow) unsigned char[size];
  case Form::Aligned:
    try {
      void *p = ::operator new(size, std::align_val_t(4096));
      check((reinterpret_cast<uintptr_t>(p) & 4095) == 0, name, "aligned new returned a misaligned block");
      return p;
    } catch (const std::bad_alloc &) {
      return nullptr;
    }
  }
  return nullptr;
}

void release(Form form, void *p) {
  if (form == Form::Aligned)
    ::operator delete(p, std::align_val_t(4096));
  else
    delete[] static_cast<unsigned char *>(p);
}

size_t exhaust(Form form, size_t size, const char *name) {
  size_t n = 0;
  while (n < slot_cap) {
    auto *b = static_cast<unsigned char *>(allocate(form, size, name));
    if (!b) return n;
    b[0] = static_cast<unsigned char>(n);
    b[size - 1] = static_cast<unsigned char>(n >> 8);
    slots[n++] = b;
  }
  check(false, name, "allocation never failed under the limit");
  return n;
}

void release_all(Form form, size_t n, size_t size, const char *name) {
  size_t damaged = 0;
  for (size_t i = 0; i < n; i++) {
    auto *b = static_cast<unsigned char *>(slots[i]);
    if (b[0] != static_cast<unsigned char>(i) || b[size - 1] != static_cast<unsigned char>(i >> 8)) damaged++;
    release(form, b);
  }
  check(damaged == 0, name, "blocks damaged while memory was exhausted");
}

void scenario(Form form, size_t size, const char *label) {
  char name[96];
  std::snprintf(name, sizeof name, "%s(%zu)", label, size);
  size_t first = exhaust(form, size, name);
  release_all(form, first, size, name);
  size_t again = exhaust(form, size, name);
  release_all(form, again, size, name);
  std::printf("%s: %zu blocks (%zu MiB) before failure, %zu again after delete\n", name, first,
              first * size / kMiB, again);
  check(first * size >= headroom / 8, name,
        "less than 1/8 of the headroom usable after the earlier scenarios freed all their blocks");
  check(again >= first / 2, name, "allocation did not work again after delete");
}

void huge_requests() {
  const char *name = "huge";
  bool threw = false;
  try {
    std::vector<char> v;
    v.reserve(size_t(1) << 46);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  check(threw, name, "vector::reserve(64 TiB) did not throw bad_alloc");
  threw = false;
  volatile size_t count = size_t(-1) / 4;
  try {
    int *p = new int[count];
    delete[] p;
  } catch (const std::bad_alloc &) {  // std::bad_array_new_length derives from it
    threw = true;
  }
  check(threw, name, "new int[SIZE_MAX/4] did not throw bad_alloc");
  volatile size_t huge = size_t(1) << 62;
  char *nothrow_block = new (std::nothrow) char[huge];
  check(nothrow_block == nullptr, name, "nothrow new of 4 EiB did not return nullptr");
  delete[] nothrow_block;
  std::printf("huge: vector::reserve, overflowing new[] and nothrow new fail cleanly\n");
}

}  // namespace

int main(int argc, char **argv) {
  static char outbuf[4096];
  std::setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
  headroom = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 192) * kMiB;
  slot_cap = (headroom + 128 * kMiB) / 32;  // 64-byte blocks may also fill what the allocator kept mapped
  void *map = mmap(nullptr, slot_cap * sizeof(void *), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return 2;
  slots = static_cast<void **>(map);
  for (size_t s = 16; s <= 32 * kMiB; s *= 4) delete[] new char[s];
  try {  // the first exception allocates its runtime state; do it before the limit
    throw std::bad_alloc();
  } catch (const std::bad_alloc &) {
  }

  rlimit rl;
  getrlimit(RLIMIT_AS, &rl);
  size_t limit = vm_size_bytes() + headroom;
  if (rl.rlim_max != RLIM_INFINITY && limit > rl.rlim_max) limit = rl.rlim_max;
  rl.rlim_cur = limit;
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 2;
  std::printf("RLIMIT_AS set to %zu MiB (headroom %zu MiB)\n", limit / kMiB, headroom / kMiB);

  scenario(Form::Throwing, 64, "new[]");
  scenario(Form::Throwing, kMiB, "new[]");
  scenario(Form::Nothrow, 100000, "new(nothrow)[]");
  scenario(Form::Nothrow, 16 * kMiB, "new(nothrow)[]");
  scenario(Form::Aligned, 200000, "new(align 4096)");
  huge_requests();
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "all scenarios passed", failures);
  return failures ? 1 : 0;
}
