"""Scenario configuration: declarations, loading, overrides, errors, digest, `cpasim params`."""

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import cpasim.cli
from cpasim.config import Config, load_scenario, parameters
from cpasim.config.params import FORWARDER, HOSTS, SPECS, HostParams
from cpasim.errors import CpasimError

HERE = Path(__file__).parent
GOOD = sorted((HERE / "scenarios_good").glob("*.toml"))
BAD = sorted((HERE / "scenarios_bad").glob("*.toml"))
CPASIM = Path(sys.executable).parent / "cpasim"


def expected_error(path: Path) -> str:
    """The message a bad scenario must produce, from its first line ``# expect: ...``."""
    first = path.read_bytes().split(b"\n", 1)[0].decode()
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    return first.removeprefix("# expect: ")


# --- declarations ---------------------------------------------------------------------


def test_every_parameter_is_declared_once_with_doc_and_valid_default():
    specs = parameters()
    keys = [s.key for s in specs]
    assert len(keys) == len(set(keys))
    for s in specs:
        assert s.doc and "\n" not in s.doc, s.key
        if s.choices is not None:
            assert s.default in s.choices, s.key
        if s.lo is not None:
            assert s.default >= s.lo, s.key
        if s.hi is not None:
            assert s.default <= s.hi, s.key


def test_parameter_list_covers_the_required_sections():
    keys = {s.key for s in parameters()}
    for key in [
        "sim.duration", "sim.warmup", "sim.seed", "workload.kind", "workload.think_time",
        "link.rate", "link.delay", "link.mtu", "link.loss", "tcp.wmem", "tcp.dupack_threshold",
        "ip.netfilter", "qdisc.len", "driver.napi_budget", "nic.rx_ring", "nic.csum_offload",
        "pcie.max_read_request", "bus.pci_clock", "cpu.cores", "cpu.freq",
        "cpu.cost.copy_per_byte", "cpu.cost.user", "copy_engine.location",
    ]:  # fmt: skip
        assert key in keys


def test_defaults():
    cfg = load_scenario(None)
    assert cfg.sim.duration == 20e6 and cfg.sim.warmup == 2e6 and cfg.sim.seed == 1
    assert cfg.workload.kind == "tcp_stream" and cfg.workload.write_size == 65536
    assert cfg.workload.file_size_min == 500_000 and cfg.workload.file_size_max == 4_000_000
    assert cfg.link.rate == 1e9 and cfg.link.delay == 10e3 and cfg.link.mtu == 1500
    assert cfg.host("tx").tcp.wmem == 0 and cfg.rx.nic.rx_ring == 256  # 0: Linux's buffers
    assert cfg.tx.tcp.rcvbuf == 0 and cfg.tx.tcp.rmem_default == 131072
    assert cfg.tx.cpu.cost.copy_per_byte == 0.5 and cfg.tx.cpu.freq == 4e9
    assert cfg.tx.pcie.latency == 100.0 and cfg.tx.bus.pci_clock == 33e6
    assert cfg.source is None
    assert isinstance(cfg.tx, HostParams)


def test_flat_has_every_key_for_every_host_that_has_it():
    flat = load_scenario(None).flat()
    for s in parameters():
        if s.per_host:
            assert {f"hosts.{h}.{s.key}" for h in s.hosts} <= flat.keys()
            assert set(s.hosts) in ({*HOSTS}, {*HOSTS, FORWARDER}, {FORWARDER})
        else:
            assert s.key in flat
    assert len(flat) == sum(len(s.hosts) if s.per_host else 1 for s in parameters())
    # The forwarding host runs no sockets: none of TCP's keys, all of its devices'.
    assert "hosts.fw.tcp.wmem" not in flat and "hosts.fw.nic.rx_ring" in flat


# --- good scenarios -------------------------------------------------------------------


def test_tables_and_dotted_keys():
    cfg = load_scenario(HERE / "scenarios_good" / "tables.toml")
    assert cfg.sim.duration == 5e6
    assert cfg.workload.kind == "pingpong"
    assert cfg.link.rate == 1e10 and cfg.link.delay == 350e3 and cfg.link.mtu == 9000
    for host in (cfg.tx, cfg.rx):
        assert host.tcp.wmem == 2**20 and host.tcp.nagle is False
        assert host.cpu.cost.copy_per_byte == 0.25
    assert cfg.source == str(HERE / "scenarios_good" / "tables.toml")


def test_per_host_overrides_win_over_shared_keys():
    cfg = load_scenario(HERE / "scenarios_good" / "per_host.toml")
    assert cfg.tx.cpu.cores == 4 and cfg.rx.cpu.cores == 2
    assert cfg.rx.cpu.freq == 2.5e9 and cfg.tx.cpu.freq == 4e9
    assert cfg.tx.tcp.wmem == 256 * 1024 and cfg.rx.tcp.wmem == 0
    assert cfg.tx.nic.tso is True and cfg.rx.nic.tso is False


def test_plain_numbers_are_si_base_units():
    cfg = load_scenario(HERE / "scenarios_good" / "plain_si.toml")
    assert cfg.sim.duration == 10e6 and cfg.sim.warmup == 1e6
    assert cfg.link.rate == 1e9 and cfg.link.delay == 350e3 and cfg.link.mtu == 1500
    assert cfg.tx.cpu.freq == 3e9


def test_units_in_scenarios():
    cfg = load_scenario(HERE / "scenarios_good" / "units.toml")
    assert cfg.workload.bytes == 1_500_000
    assert cfg.workload.write_size == 64_000 and cfg.workload.read_size == 65_536
    assert cfg.workload.think_time == 100e3
    assert cfg.tx.copy_engine.rate == 16e9 and cfg.tx.copy_engine.latency == 500.0
    assert cfg.rx.bus.kind == "pci" and cfg.rx.bus.pci_clock == 66e6


def test_shipped_scenarios_load():
    for path in sorted((HERE.parent / "scenarios").glob("*.toml")):
        assert load_scenario(path).digest, path


# --- bad scenarios --------------------------------------------------------------------


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_scenario_message(path):
    with pytest.raises(CpasimError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected_error(path) in message
    assert "\n" not in message


def test_missing_file():
    with pytest.raises(CpasimError, match=r"^nope\.toml: scenario file not found$"):
        load_scenario("nope.toml")


def test_directory_is_not_a_scenario(tmp_path):
    with pytest.raises(CpasimError, match="is a directory"):
        load_scenario(tmp_path)


def test_cross_check_names_both_keys_after_set():
    with pytest.raises(CpasimError) as info:
        load_scenario(None, sets=["link.mtu=9000", "nic.rx_fifo=8KiB"])
    assert "hosts.tx.nic.rx_fifo" in str(info.value) and "link.mtu" in str(info.value)


# --- --set ----------------------------------------------------------------------------


def test_set_overrides_file_and_later_set_wins():
    path = HERE / "scenarios_good" / "tables.toml"
    cfg = load_scenario(path, sets=["link.rate=40Gbps", "tcp.nagle=true", "link.rate=25Gbps"])
    assert cfg.link.rate == 25e9
    assert cfg.tx.tcp.nagle is True
    assert cfg.link.delay == 350e3  # untouched file value


def test_set_values_read_as_toml():
    cfg = load_scenario(
        None,
        sets=[
            "hosts.rx.cpu.cores=2",
            "workload.kind=udp_stream",
            "link.delay=0.00035",
            "link.loss=0.01",
            "tcp.delayed_ack=false",
            'tcp.cc="reno"',
            " sim.seed = 7 ",
        ],
    )
    assert cfg.rx.cpu.cores == 2 and cfg.tx.cpu.cores == 1
    assert cfg.workload.kind == "udp_stream" and cfg.link.delay == 350e3
    assert cfg.link.loss == 0.01 and cfg.tx.tcp.delayed_ack is False
    assert cfg.rx.tcp.cc == "reno" and cfg.sim.seed == 7


def test_shared_set_applies_over_a_per_host_file_value():
    cfg = load_scenario(HERE / "scenarios_good" / "per_host.toml", sets=["cpu.cores=8"])
    assert cfg.tx.cpu.cores == 8 and cfg.rx.cpu.cores == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("link.rate", "--set 'link.rate': expected KEY=VALUE"),
        ("=10Gbps", "--set '=10Gbps': expected KEY=VALUE"),
        ("link.rate=", "--set 'link.rate=': expected KEY=VALUE"),
        ("link.rat=1Gbps", "--set: unknown key 'link.rat'; did you mean 'link.rate'?"),
        ("hosts.tx=1", "--set: 'hosts.tx' needs a parameter key"),
        ("hosts.a.cpu.cores=2", "--set: unknown host 'a'"),
        ("cpu.cores=two", "--set: cpu.cores = 'two': expected an integer"),
        ("tcp.nagle=1", "--set: tcp.nagle = 1: expected true or false"),
        ("link.rate=10GiBps", "binary prefix 'Gi' is not allowed on a rate"),
    ],
)
def test_bad_set(text, message):
    with pytest.raises(CpasimError) as info:
        load_scenario(None, sets=[text])
    assert message in str(info.value)


# --- reading values -------------------------------------------------------------------


def test_value():
    cfg = load_scenario(None, sets=["hosts.tx.tcp.wmem=1MiB"])
    assert cfg.value("link.rate") == 1e9
    assert cfg.value("hosts.tx.tcp.wmem") == 2**20
    assert cfg.value("tcp.rmem") == 0  # both hosts agree
    with pytest.raises(CpasimError, match=r"tcp\.wmem differs between hosts \(tx: 1MiB, rx: 0B\)"):
        cfg.value("tcp.wmem")
    with pytest.raises(CpasimError, match="did you mean 'link.rate'"):
        cfg.value("link.rates")


def test_host():
    cfg = load_scenario(None)
    assert cfg.host("rx") is cfg.rx
    with pytest.raises(CpasimError, match="unknown host 'server'"):
        cfg.host("server")


def test_config_is_immutable_and_picklable():
    cfg = load_scenario(HERE / "scenarios_good" / "per_host.toml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.link = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.tx.tcp.wmem = 1
    clone = pickle.loads(pickle.dumps(cfg))
    assert clone == cfg and clone.digest == cfg.digest and hash(clone) == hash(cfg)
    assert clone.flat() == cfg.flat()
    cfg.flat()["link.rate"] = 0  # a copy: the config does not change
    assert cfg.link.rate == 1e9


# --- overrides ------------------------------------------------------------------------


def test_with_overrides():
    base = load_scenario(None)
    cfg = base.with_overrides(
        {"link.rate": "10Gbps", "hosts.tx.tcp.wmem": "1MiB", "cpu.cores": 2, "link.delay": 0.001}
    )
    assert cfg.link.rate == 1e10 and cfg.link.delay == 1e6
    assert cfg.tx.tcp.wmem == 2**20 and cfg.rx.tcp.wmem == 0
    assert cfg.tx.cpu.cores == cfg.rx.cpu.cores == 2
    assert base.link.rate == 1e9  # the original is unchanged
    assert base.with_overrides({"hosts.rx.cpu.cores": "2", "tcp.nagle": "false"}).rx.cpu.cores == 2
    with pytest.raises(CpasimError, match="^override: nic.tx_ring = 1 is out of range"):
        base.with_overrides({"nic.tx_ring": 1})
    with pytest.raises(CpasimError, match=r"tcp\.rmem \(1000 B\) is smaller than one MSS"):
        base.with_overrides({"tcp.rmem": "1kB"})


def test_changes():
    base = load_scenario(None)
    cfg = base.with_overrides({"link.rate": "10Gbps", "hosts.rx.cpu.cores": 2})
    assert base.changes(cfg) == {"link.rate": (1e9, 1e10), "hosts.rx.cpu.cores": (1, 2)}
    assert cfg.changes(cfg) == {}


def test_with_values_takes_internal_units():
    base = load_scenario(None)
    cfg = base.with_values({"link.delay": 350e3, "link.rate": 2.5e9, "hosts.rx.tcp.rmem": 4096})
    assert cfg.link.delay == 350e3 and cfg.link.rate == 2.5e9 and cfg.rx.tcp.rmem == 4096
    same = base.with_values({k: base.value(k) for k in ("link.delay", "sim.duration", "tcp.wmem")})
    assert same.digest == base.digest
    with pytest.raises(CpasimError, match="link.rate = '0bps' is out of range"):
        base.with_values({"link.rate": 0.0})


# --- digest and round trip ------------------------------------------------------------


def test_digest_is_stable_across_processes():
    path = HERE / "scenarios_good" / "tables.toml"
    code = f"from cpasim.config import load_scenario; print(load_scenario({str(path)!r}).digest)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == load_scenario(path).digest
    assert len(load_scenario(path).digest) == 16


def _other_value(spec, value):
    """A valid value of ``spec`` different from ``value``."""
    if spec.choices is not None:
        return next(c for c in spec.choices if c != value)
    if spec.type == "bool":
        return not value
    step = 1 if spec.type in ("int", "size") else abs(value) + 1.0
    for new in (value + step, value - step, (value + spec.lo) / 2 if spec.lo is not None else None):
        inside = (spec.lo is None or new >= spec.lo) and (spec.hi is None or new <= spec.hi)
        if new is not None and new != value and inside:
            return new
    raise AssertionError(spec.key)


def test_digest_changes_when_any_value_changes():
    # Room for warmup to move either way; nic.itr=fixed lets nic.throttle_usecs move.
    base = load_scenario(None, sets=["sim.warmup=1ms", "nic.itr=fixed"])
    digests = {base.digest}
    for key, spec in SPECS.items():
        host = "rx" if "rx" in spec.hosts else FORWARDER
        full = f"hosts.{host}.{key}" if spec.per_host else key
        # A fixed buffer, once set, holds at least one segment.
        other = 65536 if key in ("tcp.wmem", "tcp.rmem") else _other_value(spec, base.value(full))
        values = {full: other}
        if spec.hosts == (FORWARDER,):  # a key of the forwarding host only: with one
            values["topology.kind"] = "forward"
        if key == "cpu.irq_preempt":  # a key of Linux 2.6.13's send path only
            values[f"hosts.{host}.ip.send_path"] = "2.6.13"
        cfg = base.with_values(values)
        assert cfg.digest not in digests, key
        digests.add(cfg.digest)
    assert len(digests) == len(SPECS) + 1


def _valid_values(spec):
    if spec.choices is not None:
        return st.sampled_from(spec.choices)
    if spec.type == "bool":
        return st.booleans()
    lo = spec.lo if spec.lo is not None else 0
    if spec.type in ("int", "size"):
        hi = spec.hi if spec.hi is not None else lo + 10**9
        return st.integers(lo, hi)
    hi = spec.hi if spec.hi is not None else lo + 1e12
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def _assignment(draw):
    spec = draw(st.sampled_from(parameters()))
    key = f"hosts.{draw(st.sampled_from(spec.hosts))}.{spec.key}" if spec.per_host else spec.key
    return key, spec, draw(_valid_values(spec))


@settings(max_examples=150, deadline=None)
@given(st.lists(_assignment(), min_size=1, max_size=6))
def test_set_text_and_internal_values_agree(assignments):
    """``--set key=<text>`` and ``with_values`` give the same Config or the same error."""
    sets = [f"{key}={spec.format(value)}" for key, spec, value in assignments]
    values = {key: value for key, _, value in assignments}
    try:
        expected = load_scenario(None).with_values(values, where="--set")
    except CpasimError as exc:
        with pytest.raises(CpasimError) as info:
            load_scenario(None, sets=sets)
        assert str(info.value) == str(exc)
        return
    cfg = load_scenario(None, sets=sets)
    assert cfg == expected and cfg.digest == expected.digest
    for key, value in values.items():
        assert cfg.value(key) == value


def _roundtrip(cfg: Config, tmp_path: Path) -> Config:
    path = tmp_path / "resolved.toml"
    path.write_text(cfg.to_toml())
    return load_scenario(path)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_to_toml_round_trip(path, tmp_path):
    cfg = load_scenario(path)
    again = _roundtrip(cfg, tmp_path)
    assert again.digest == cfg.digest and again == cfg


_override_keys = st.sampled_from(
    [
        ("link.delay", st.floats(0, 10e9)),
        ("link.rate", st.floats(1e3, 1e13)),
        ("hosts.tx.cpu.freq", st.floats(1e6, 1e11)),
        ("hosts.rx.tcp.wmem", st.integers(1448, 2**30)),
        ("hosts.tx.cpu.cost.copy_per_byte", st.floats(0, 1e6)),
        ("link.loss", st.floats(0, 1)),
    ]
)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_to_toml_round_trips_arbitrary_values(tmp_path_factory, data):
    key, values = data.draw(_override_keys)
    value = data.draw(values)
    cfg = load_scenario(None).with_values({key: value})
    again = _roundtrip(cfg, tmp_path_factory.mktemp("rt"))
    assert again.value(key) == value and again.digest == cfg.digest


# --- cpasim params --------------------------------------------------------------------


def _argv(*args: str) -> list[str]:
    """Arguments for ``cpasim params``; typer runs a lone command without its name."""
    cpasim.cli._register()
    command = typer.main.get_command(cpasim.cli.app)
    return ["params", *args] if isinstance(command, typer.core.TyperGroup) else list(args)


def test_params_lists_every_key():
    result = CliRunner().invoke(cpasim.cli.app, _argv())
    assert result.exit_code == 0, result.output
    listed = {line.split()[0] for line in result.output.splitlines() if line.strip()}
    assert {s.key for s in parameters()} <= listed


def test_params_prefix_and_json():
    result = CliRunner().invoke(cpasim.cli.app, _argv("tcp", "--json"))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["key"] for r in rows] == [s.key for s in parameters() if s.key.startswith("tcp")]
    wmem = next(r for r in rows if r["key"] == "tcp.wmem")
    assert wmem["unit"] == "B" and wmem["default"] == 0 and wmem["per_host"] is True
    assert wmem["default_text"] == "0B"
    kind = json.loads(CliRunner().invoke(cpasim.cli.app, _argv("workload.kind", "--json")).output)
    assert kind[0]["choices"] == [
        "tcp_stream",
        "udp_stream",
        "pingpong",
        "rpc",
        "webserver",
        "udp_gbn",
    ]


def test_params_resolved_scenario():
    path = HERE / "scenarios_good" / "per_host.toml"
    runner = CliRunner()
    result = runner.invoke(cpasim.cli.app, _argv("--scenario", str(path), "--set", "link.mtu=9000"))
    assert result.exit_code == 0, result.output
    cfg = load_scenario(path, sets=["link.mtu=9000"])
    assert cfg.digest in result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines()[1:])
    assert lines["hosts.rx.cpu.cores"] == "2" and lines["link.mtu"] == "9000B"
    assert len(lines) == len(cfg.flat())
    as_json = json.loads(runner.invoke(cpasim.cli.app, _argv("-s", str(path), "--json")).output)
    assert as_json["digest"] == load_scenario(path).digest
    assert as_json["values"] == load_scenario(path).flat()
    toml = runner.invoke(cpasim.cli.app, _argv("-s", str(path), "--toml")).output
    assert toml == load_scenario(path).to_toml()


def test_params_unknown_prefix_is_a_user_error(capsys):
    with pytest.raises(SystemExit) as info:
        cpasim.cli.main(_argv("tpc"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == "cpasim: error: no parameter key starts with 'tpc'; did you mean 'tcp'?\n"


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_scenarios_through_the_cli(path, capsys):
    with pytest.raises(SystemExit) as info:
        cpasim.cli.main(_argv("--scenario", str(path)))
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"cpasim: error: {path}: ")
    assert expected_error(path) in captured.err


@pytest.mark.slow
def test_installed_command():
    bad = HERE / "scenarios_bad" / "unknown_key.toml"
    run = subprocess.run(
        [CPASIM, *_argv("--scenario", str(bad))], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"cpasim: error: {bad}: {expected_error(bad)}\n"
    ok = subprocess.run([CPASIM, *_argv("link")], capture_output=True, text=True, check=True)
    assert "link.rate" in ok.stdout and "1kbps..10Tbps" in ok.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "link.delay=350",
            "link.delay = 350: 350 s is out of range 0s..10s; plain numbers are seconds "
            "(write the unit, e.g. '350us')",
        ),
        ("link.rate=1e15", "1e+15 bps is out of range 1kbps..10Tbps; plain numbers are bit/s"),
        ("link.delay='350'", "350 s is out of range 0s..10s; plain numbers are seconds"),
        # With a unit the value needs no hint.
        ("link.delay='20s'", "link.delay = '20s' is out of range: expected 0s..10s"),
    ],
)
def test_out_of_range_plain_number_says_its_unit(override, message):
    with pytest.raises(CpasimError) as err:
        load_scenario(None, sets=[override])
    assert message in str(err.value)
    assert ("plain numbers" in str(err.value)) == ("s'" not in override)
