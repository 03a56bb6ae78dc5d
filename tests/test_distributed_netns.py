"""Two "hosts" over TCP: ranks in two network namespaces (each with its own host name), joined by a veth pair,
launched by the mpich wheel's mpiexec (Hydra) through a launcher script that stands in for ssh. The all_reduce's
4 MiB must cross the veth link: the namespaces share the machine, so MPI's shared-memory paths are switched off
(MPIR_CVAR_NOLOCAL, and UCX/libfabric restricted to TCP), as they would be unreachable between real hosts.
Needs root and `ip` (iproute2) and `unshare`; skipped with the reason otherwise."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from dist_util import WORKERS, env, mpiexec_or_skip


def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def rx_bytes(ns, dev):
    return int(open_ns_stat(ns, dev, "rx_bytes"))


def open_ns_stat(ns, dev, what):
    p = sh("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/statistics/{what}")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture
def two_hosts(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "unshare"):
        if not shutil.which(tool):
            pytest.skip(f"`{tool}` is not installed (iproute2, util-linux)")
    tag = f"gm{os.getpid() % 100000}"
    ns, dev, ips = [f"{tag}a", f"{tag}b"], [f"{tag}a0", f"{tag}b0"], ["10.231.7.1", "10.231.7.2"]
    steps = [("ip", "netns", "add", ns[0]), ("ip", "netns", "add", ns[1]),
             ("ip", "link", "add", dev[0], "type", "veth", "peer", "name", dev[1])]
    for i in (0, 1):
        steps += [("ip", "link", "set", dev[i], "netns", ns[i]),
                  ("ip", "-n", ns[i], "addr", "add", f"{ips[i]}/24", "dev", dev[i]),
                  ("ip", "-n", ns[i], "link", "set", dev[i], "up"), ("ip", "-n", ns[i], "link", "set", "lo", "up")]
    try:
        for s in steps:
            p = sh(*s)
            if p.returncode != 0:
                pytest.skip(f"cannot set up network namespaces here: `{' '.join(s)}`: {p.stderr.strip()}")
        launcher = tmp_path / "netns_ssh.sh"  # Hydra calls it as `ssh -x HOST COMMAND`
        launcher.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            while [ "${{1#-}}" != "$1" ]; do shift; done
            case $1 in {ips[0]}) ns={ns[0]};; {ips[1]}) ns={ns[1]};; *) echo "no host $1" >&2; exit 1;; esac
            shift
            exec ip netns exec $ns unshare --uts sh -c "hostname host-$ns; $*"
            """))
        launcher.chmod(0o755)
        yield ns, dev, ips, str(launcher)
    finally:
        for n in ns:
            sh("ip", "netns", "del", n)  # deletes the veth pair with it


def test_two_hosts_over_tcp(two_hosts):
    ns, dev, ips, launcher = two_hosts
    exe = mpiexec_or_skip()
    if not os.path.exists(os.path.join(os.path.dirname(exe), "hydra_pmi_proxy")):
        pytest.skip(f"{exe} is not MPICH's Hydra (its -launcher-exec runs the namespaces' launcher)")
    before = rx_bytes(ns[0], dev[0]), rx_bytes(ns[1], dev[1])
    cmd = (f"hostname host-{ns[0]}; exec {exe} -launcher ssh -launcher-exec {launcher} -hosts {','.join(ips)} "
           f"-n 2 {sys.executable} {os.path.join(WORKERS, 'two_hosts.py')}")
    e = env(MPIR_CVAR_NOLOCAL=1, UCX_TLS="tcp,self", FI_PROVIDER="tcp")
    proc = subprocess.run(["ip", "netns", "exec", ns[0], "unshare", "--uts", "sh", "-c", cmd], env=e,
                          capture_output=True, text=True, timeout=180)
    text = f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, text
    assert f"OK rank 0 on host-{ns[0]}" in proc.stdout and f"OK rank 1 on host-{ns[1]}" in proc.stdout, text
    after = rx_bytes(ns[0], dev[0]), rx_bytes(ns[1], dev[1])
    for i in (0, 1):  # each side received the other's 4 MiB over the link
        assert after[i] - before[i] >= 4 << 20, (i, before, after)
