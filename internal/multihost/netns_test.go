//go:build linux && !race

package multihost

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// network is one scenario's hosts: a switch (a bridge in a namespace of
// its own) and hosts, each a namespace with lo and one veth, eth0, whose
// other end is a port of the switch.
type network struct {
	t       *testing.T
	sw      string // the switch's namespace
	Trainer host
	Daemons []host
}

// host is one namespace on the switch.
type host struct {
	NS   string
	IP   string
	Port string // its link's end on the switch: where a test pulls the cable
}

// Every network lives in namespaces of its own, never in the host's, so
// all scenarios (and concurrent runs) may use the same subnet and short
// interface names: veths are created straight into their namespaces.
const (
	subnet     = "10.77.0."
	trainerIP  = subnet + "10"
	daemonPort = "50051"
)

// nsPrefix starts every namespace this process makes; its pid makes it
// unique among live runs and tells a stale one (its process gone).
var (
	nsPrefix  = fmt.Sprintf("mh%d", os.Getpid())
	scenarios atomic.Int32
)

// requireNetns skips the test where it cannot build networks: -short,
// not root, no ip(8), or namespaces, bridges or veths refused (some
// sandboxes). It probes once per process.
func requireNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multihost: real processes on network namespaces; skipped under -short")
	}
	probe.once.Do(func() { probe.why = canNetns() })
	if probe.why != "" {
		t.Skip("multihost: " + probe.why)
	}
}

var probe struct {
	once sync.Once
	why  string // why not; "" if it can
}

func canNetns() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip(8) (iproute2)"
	}
	removeStale()
	ns := nsPrefix + "probe"
	defer exec.Command("ip", "netns", "del", ns).Run()
	for _, args := range [][]string{{"netns", "add", ns}, {"-n", ns, "link", "add", "br0", "type", "bridge"},
		{"-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Sprintf("refused here: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return ""
}

// removeStale deletes namespaces a killed run of this test left (named
// mhPID… for a PID no longer alive), so they do not pile up.
func removeStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	re := regexp.MustCompile(`^mh(\d+)[a-z]`)
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		m := re.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if pid, _ := strconv.Atoi(m[1]); alive(pid) {
			continue
		}
		exec.Command("ip", "netns", "del", name).Run()
		os.RemoveAll(filepath.Join("/etc/netns", name))
	}
}

// alive says whether process pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	return !bytes.HasPrefix(rest, []byte("Z"))
}

// newNetwork builds a switch, a trainer host and n daemon hosts
// (10.77.0.2 onward), all torn down when the test ends.
func newNetwork(t *testing.T, n int) *network {
	t.Helper()
	requireNetns(t)
	pre := fmt.Sprintf("%s%c", nsPrefix, 'a'+rune(scenarios.Add(1)-1)%26)
	net := &network{t: t, sw: pre + "-sw"}
	net.Trainer = host{NS: pre + "-t", IP: trainerIP, Port: "pt"}
	for i := range n {
		net.Daemons = append(net.Daemons, host{NS: fmt.Sprintf("%s-d%d", pre, i+1), IP: subnet + strconv.Itoa(i+2), Port: fmt.Sprintf("pd%d", i+1)})
	}
	var made []string
	t.Cleanup(func() {
		for _, ns := range made {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Logf("multihost: ip netns del %s: %v: %s", ns, err, out)
			}
			os.RemoveAll(filepath.Join("/etc/netns", ns))
		}
	})
	for _, ns := range append([]string{net.sw, net.Trainer.NS}, nsNames(net.Daemons)...) {
		net.must("netns", "add", ns)
		made = append(made, ns)
		net.must("-n", ns, "link", "set", "lo", "up")
	}
	net.must("-n", net.sw, "link", "add", "br0", "type", "bridge")
	net.must("-n", net.sw, "link", "set", "br0", "up")
	for _, h := range append([]host{net.Trainer}, net.Daemons...) {
		net.must("link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", h.Port, "netns", net.sw)
		net.must("-n", net.sw, "link", "set", h.Port, "master", "br0", "up")
		net.must("-n", h.NS, "addr", "add", h.IP+"/24", "dev", "eth0")
		net.must("-n", h.NS, "link", "set", "eth0", "up")
	}
	return net
}

func nsNames(hs []host) []string {
	var s []string
	for _, h := range hs {
		s = append(s, h.NS)
	}
	return s
}

// Addr is the daemon address of host i.
func (n *network) Addr(i int) string { return n.Daemons[i].IP + ":" + daemonPort }

// Addrs is every daemon's address.
func (n *network) Addrs() []string {
	var a []string
	for i := range n.Daemons {
		a = append(a, n.Addr(i))
	}
	return a
}

// ip runs ip(8) with args.
func (n *network) ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (n *network) must(args ...string) {
	n.t.Helper()
	if err := n.ip(args...); err != nil {
		n.t.Fatal(err)
	}
}

// SetLink pulls (up false) or plugs back daemon i's cable at the switch:
// neither end sees a reset, packets just stop.
func (n *network) SetLink(i int, up bool) {
	n.t.Helper()
	state := map[bool]string{true: "up", false: "down"}[up]
	n.must("-n", n.sw, "link", "set", n.Daemons[i].Port, state)
}

// Netem makes daemon i's link slow and lossy both ways (tc-netem spec,
// e.g. "delay 20ms loss 1%"). It fails where the kernel lacks sch_netem.
func (n *network) Netem(i int, spec string) error {
	for _, at := range [][2]string{{n.sw, n.Daemons[i].Port}, {n.Daemons[i].NS, "eth0"}} {
		args := append([]string{"-n", at[0], "qdisc", "add", "dev", at[1], "root", "netem"}, strings.Fields(spec)...)
		if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// Hosts writes the trainer's /etc/hosts: ip netns exec bind-mounts
// /etc/netns/NS/hosts over it. Later calls append in place (the mount
// holds the inode, so the file must not be replaced), which Go's resolver
// notices within about 5 s.
func (n *network) Hosts(lines ...string) {
	n.t.Helper()
	dir := filepath.Join("/etc/netns", n.Trainer.NS)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "hosts"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintln(f, l); err != nil {
			n.t.Fatal(err)
		}
	}
}

// Command runs name in namespace ns. ip execs it, so the process is
// name's own; it dies with the test (Pdeathsig), even a killed one.
func (n *network) Command(ns, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
