"""tests/test_early_init.py — allocation before main and from dlopen'ed code (owner: tests suite).

early_ctor_main allocates in its constructor; early_ctor_lib_preload.so, preloaded beside libhakmem,
allocates in its constructor (which runs before libhakmem's own when it is preloaded after it) and in its
destructor. dlopen_host loads dlopen_lib_alloc.so 20 times: constructor, functions and destructor
allocate and free memory shared with the host.
"""
import pytest

from conftest import VARIANTS, describe


def expect_ok(proc, allocator):
    assert proc.returncode == 0, describe(proc)
    assert f"allocator: {allocator}" in proc.stdout, describe(proc)
    assert " 0 failed" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_program_constructor_allocates(run_program, variant):
    expect_ok(run_program("early_ctor_main", variant), "glibc" if variant == "glibc" else "hakmem")


@pytest.mark.parametrize("order", ["hakmem-first", "lib-first"])
@pytest.mark.parametrize("secure", [False, True], ids=["default", "secure"])
def test_preloaded_library_constructor_allocates(run_hakmem, test_binary, libhakmem, libhakmem_secure, order,
                                                secure):
    lib = libhakmem_secure if secure else libhakmem
    ctor_lib = test_binary("early_ctor_lib_preload", "so")
    where = {"preload_after": [ctor_lib]} if order == "hakmem-first" else {"preload_before": [ctor_lib]}
    proc = run_hakmem([test_binary("early_ctor_main", "glibc"), "--expect-lib"], lib=lib, **where)
    expect_ok(proc, "hakmem")


def test_preloaded_library_constructor_on_glibc(run_plain, test_binary):
    proc = run_plain([test_binary("early_ctor_main", "glibc"), "--expect-lib"],
                     env={"LD_PRELOAD": str(test_binary("early_ctor_lib_preload", "so"))})
    expect_ok(proc, "glibc")


def test_linked_program_with_preloaded_constructor(run_plain, test_binary):
    proc = run_plain([test_binary("early_ctor_main"), "--expect-lib"],
                     env={"LD_PRELOAD": str(test_binary("early_ctor_lib_preload", "so")), "HAKMEM_STATS": "1"})
    expect_ok(proc, "hakmem")
    assert "hakmem stats:" in proc.stderr, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_dlopen_library_allocates(run_program, test_binary, variant):
    proc = run_program("dlopen_host", variant, args=[test_binary("dlopen_lib_alloc", "so")])
    expect_ok(proc, "glibc" if variant == "glibc" else "hakmem")


@pytest.mark.parametrize("variant", VARIANTS)
def test_unloaded_plugin_embedding_hakmem_leaves_the_host_alive(run_program, test_binary, variant):
    """A plugin with hakmem compiled in (as the Rust crate embeds it) starts the region release thread and is
    unloaded: hakmem pins its object (RTLD_NODELETE), so the thread's next wake-up still finds its code (the
    host died with SIGSEGV; on glibc every time, with hakmem as the host's allocator not)."""
    proc = run_program("embed_host", variant, args=[test_binary("embed_lib_regions", "so")], timeout=60)
    assert proc.returncode == 0 and "host survived" in proc.stdout, describe(proc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_dlopen_of_a_library_whose_constructor_joins_an_allocating_thread(run_program, test_binary, variant):
    """The constructor holds the loader's lock while its thread's malloc starts hakmem's purger: nothing
    on that path may wait for the lock (pinning hakmem's object there hung dlopen for good)."""
    proc = run_program("dlopen_join_host", variant, args=[test_binary("dlopen_lib_ctor_join", "so")], timeout=30)
    assert proc.returncode == 0 and "loaded" in proc.stdout, describe(proc)
