"""Parsing of workload output lines and strace -c summaries."""

import pytest

from lab.parse import parse_kv, parse_output, parse_strace_summary, parse_value

OUTPUT = """allocator-check: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
PROGRESS t=0.500 ops=1000 ops_per_sec=2000.0
some human text that is ignored
PROGRESS t=1.000 ops=3000 ops_per_sec=4000.0
RESULT workload=random_mixed threads=1 ops=123456 seconds=0.5 ops_per_sec=246912.0 ns_per_op=4.05
RESULT peak_rss_kb=2048
Throughput = 246912 ops/s
RESULT lat_count=10 lat_p50_ns=12 ops=99
HIST 10 11 7
HIST 64 66 3
"""


def test_parse_output_collects_every_kind_of_line():
    out = parse_output(OUTPUT)
    assert out.allocator_check == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    assert out.results["workload"] == "random_mixed"
    assert out.results["threads"] == 1 and isinstance(out.results["threads"], int)
    assert out.results["seconds"] == 0.5
    assert out.results["peak_rss_kb"] == 2048
    assert out.results["ops"] == 99, "a later RESULT line overrides an earlier key"
    assert [p["t"] for p in out.progress] == [0.5, 1.0]
    assert out.progress[1]["ops_per_sec"] == 4000.0
    assert out.hist == [(10, 11, 7), (64, 66, 3)]
    assert out.throughput == 246912.0


def test_parse_output_without_check_line():
    out = parse_output("RESULT ops=1\n")
    assert out.allocator_check is None
    assert out.results == {"ops": 1}


def test_parse_value_types():
    assert parse_value("42") == 42
    assert parse_value("4.5") == 4.5
    assert parse_value("tsc") == "tsc"


@pytest.mark.parametrize("bad", ["ops", "=3", "a=1 b"])
def test_parse_kv_rejects_malformed_tokens(bad):
    with pytest.raises(ValueError):
        parse_kv(bad)


def test_parse_output_rejects_a_broken_hist_line():
    with pytest.raises(ValueError):
        parse_output("HIST 1 2\n")


STRACE = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 45.16    0.005323           6       851           munmap
 33.37    0.003934           4       876           mmap
 10.00    0.000100           1        12         3 madvise
  0.00    0.000000           0         2           brk
------ ----------- ----------- --------- --------- ----------------
100.00    0.011788           4      1741         3 total
"""


def test_parse_strace_summary_reads_calls_with_and_without_errors():
    calls = parse_strace_summary(STRACE)
    assert calls == {"munmap": 851, "mmap": 876, "madvise": 12, "brk": 2}


def test_parse_strace_summary_of_nothing_is_empty():
    assert parse_strace_summary("") == {}
    assert parse_strace_summary("garbage line with many words in it\n") == {}
