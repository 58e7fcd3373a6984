//go:build linux && !race

package multihost

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client/clienttest"
)

// The recipe under test: docs/DEPLOY.md's "Two machines, by hand", three
// shell blocks each under a marker line <!-- recipe:NAME -->.
const (
	recipeDoc      = "../../docs/DEPLOY.md" // from this package's directory
	recipeCerts    = "certs"
	recipePoolHost = "pool-host"
	recipeGPUHost  = "gpu-host"
	recipePort     = "50051" // what the pool-host block listens on

	// The dataset the pool hosts serve: CIFAR-sized JPEGs in the folder
	// layout, train/CLASS/NNNN.jpg.
	recipeImages  = 256
	recipeClasses = 4
	recipeSide    = 32

	// recipeLimit bounds the GPU host's block (both trainer commands):
	// about 10 s on 2 cores, generous for a loaded CI machine.
	recipeLimit = 3 * time.Minute
)

// TestDeployRecipe runs the doc's two-host recipe as written: the certs
// block with openssl, the pool-host block on each pool host and the
// gpu-host block on a third, with the blocks' own defaults (the pool at
// the addresses the doc names, so the certificates' IP SANs and the
// trainer's --addr are the doc's). Only DATA, HOST and EPOCHS are set, as
// a reader would. The hosts are network namespaces on one bridge; where
// those are refused it falls back to loopback addresses (127.0.0.11 for
// 10.0.0.11), overriding POOL and ADDRS to match.
func TestDeployRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("multihost: real processes on network namespaces; skipped under -short")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("multihost: the recipe makes its certificates with openssl(1), not found")
	}
	blocks := recipeBlocks(t)
	pool := recipeDefaults(t, blocks)
	bin := recipeBin(t)
	work := t.TempDir()
	data := filepath.Join(work, "train.tar")
	writeRecipeData(t, data)

	// Where each host runs (a namespace, or "" for this one) and what the
	// blocks are told beyond their defaults.
	var (
		poolNS  = make([]string, len(pool))
		gpuNS   string
		certEnv []string
		gpuEnv  = []string{"EPOCHS=1"}
		hostIPs = slices.Clone(pool)
	)
	probe.once.Do(func() { probe.why = canNetns() })
	if probe.why == "" {
		gpu := recipeGPUAddr(pool)
		n := newNetwork(t, len(pool))
		readdress(t, n, &n.Trainer, gpu)
		for i := range n.Daemons {
			readdress(t, n, &n.Daemons[i], pool[i])
			poolNS[i] = n.Daemons[i].NS
		}
		gpuNS = n.Trainer.NS
		t.Logf("multihost: the recipe's defaults on network namespaces: pool hosts %s, the GPU host %s", strings.Join(pool, " "), gpu)
	} else {
		var as []string
		for i, ip := range pool {
			hostIPs[i] = "127.0.0." + ip[strings.LastIndexByte(ip, '.')+1:]
			as = append(as, net.JoinHostPort(hostIPs[i], recipePort))
		}
		certEnv = []string{"POOL=" + strings.Join(hostIPs, " ")}
		gpuEnv = append(gpuEnv, "ADDRS="+strings.Join(as, ","))
		t.Logf("multihost: no network namespaces (%s): the recipe on loopback addresses instead, POOL=%q ADDRS=%s",
			probe.why, strings.Join(hostIPs, " "), strings.Join(as, ","))
	}

	// The certificates and tokens, in the directory every host shares.
	certs := recipeShell(context.Background(), "", work, bin, blocks[recipeCerts], certEnv...)
	if out, err := certs.CombinedOutput(); err != nil {
		t.Fatalf("the %s block: %v\n%s", recipeCerts, err, out)
	}
	checkRecipeCerts(t, work, hostIPs)

	for i, ip := range hostIPs {
		startRecipeHost(t, poolNS[i], work, bin, blocks[recipePoolHost], ip, data)
	}

	ctx, cancel := context.WithTimeout(context.Background(), recipeLimit)
	defer cancel()
	gpu := recipeShell(ctx, gpuNS, work, bin, blocks[recipeGPUHost], gpuEnv...)
	start := time.Now()
	out, err := gpu.CombinedOutput()
	t.Logf("the %s block ran in %v:\n%s", recipeGPUHost, time.Since(start).Round(time.Millisecond), out)
	if ctx.Err() != nil {
		t.Fatalf("the %s block did not finish within %v", recipeGPUHost, recipeLimit)
	}
	if err != nil {
		t.Fatalf("the %s block: %v", recipeGPUHost, err)
	}
	m := regexp.MustCompile(`(?m)^(\d+) images in (\d+) batches`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("trainer consume printed no \"N images in M batches\" line")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != recipeImages {
		t.Errorf("trainer consume read %d images from the pool, the dataset has %d", n, recipeImages)
	}
	if !regexp.MustCompile(`(?m)^epoch 1/1: train loss`).Match(out) {
		t.Errorf("trainer train printed no \"epoch 1/1: train loss\" line")
	}
}

// recipeBlocks extracts each recipe block of the doc: the fenced block
// after its marker line. A marker missing, repeated or not followed by a
// fence fails the test, so the doc and this test cannot drift apart.
func recipeBlocks(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(recipeDoc)
	if err != nil {
		t.Fatalf("the recipe's doc: %v", err)
	}
	lines := strings.Split(string(doc), "\n")
	blocks := map[string]string{}
	for _, name := range []string{recipeCerts, recipePoolHost, recipeGPUHost} {
		marker := "<!-- recipe:" + name + " -->"
		at := -1
		for i, l := range lines {
			if strings.TrimSpace(l) != marker {
				continue
			}
			if at >= 0 {
				t.Fatalf("%s: %q is there twice (lines %d and %d)", recipeDoc, marker, at+1, i+1)
			}
			at = i
		}
		if at < 0 {
			t.Fatalf("%s: no %q line: the section \"Two machines, by hand\" must mark its shell blocks for this test", recipeDoc, marker)
		}
		i := at + 1
		for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
			i++
		}
		if i == len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			t.Fatalf("%s:%d: %q is not followed by a fenced code block", recipeDoc, at+1, marker)
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: the block after %q never ends", recipeDoc, at+1, marker)
		}
		if len(body) == 0 {
			t.Fatalf("%s:%d: the block after %q is empty", recipeDoc, at+1, marker)
		}
		blocks[name] = strings.Join(body, "\n") + "\n"
	}
	return blocks
}

// recipeDefaults reads the pool the blocks default to: the certs block's
// POOL and the gpu-host block's ADDRS, which must name the same hosts on
// the pool-host block's port, IPv4 addresses of one /24 (the network this
// test builds).
func recipeDefaults(t *testing.T, blocks map[string]string) []string {
	t.Helper()
	m := regexp.MustCompile(`POOL=\$\{POOL:-"([^"]+)"\}`).FindStringSubmatch(blocks[recipeCerts])
	if m == nil {
		t.Fatalf("%s: the %s block sets no POOL=${POOL:-\"HOST ...\"} default", recipeDoc, recipeCerts)
	}
	pool := strings.Fields(m[1])
	var want []string
	for _, h := range pool {
		ip := net.ParseIP(h).To4()
		if ip == nil || !net.IP(ip[:3]).Equal(net.ParseIP(pool[0]).To4()[:3]) {
			t.Fatalf("%s: the %s block's POOL %q: want IPv4 addresses of one /24", recipeDoc, recipeCerts, m[1])
		}
		want = append(want, net.JoinHostPort(h, recipePort))
	}
	if !strings.Contains(blocks[recipePoolHost], `"$HOST:`+recipePort+`"`) {
		t.Fatalf("%s: the %s block does not listen on \"$HOST:%s\"", recipeDoc, recipePoolHost, recipePort)
	}
	m = regexp.MustCompile(`ADDRS=\$\{ADDRS:-([^}]+)\}`).FindStringSubmatch(blocks[recipeGPUHost])
	if m == nil {
		t.Fatalf("%s: the %s block sets no ADDRS=${ADDRS:-...} default", recipeDoc, recipeGPUHost)
	}
	if addrs := strings.Trim(m[1], `"`); addrs != strings.Join(want, ",") {
		t.Fatalf("%s: the %s block's ADDRS default %q is not the %s block's POOL %q on port %s (%s)",
			recipeDoc, recipeGPUHost, addrs, recipeCerts, strings.Join(pool, " "), recipePort, strings.Join(want, ","))
	}
	return pool
}

// recipeGPUAddr is an address for the GPU host in the pool's /24, none of
// the pool's: .10 or the next free one.
func recipeGPUAddr(pool []string) string {
	prefix := pool[0][:strings.LastIndexByte(pool[0], '.')+1]
	for i := 10; ; i = i%254 + 1 {
		if ip := prefix + strconv.Itoa(i); !slices.Contains(pool, ip) {
			return ip
		}
	}
}

// readdress moves host h of n to ip, in place of the address newNetwork
// gave it (the switch does not care which subnet its hosts use).
func readdress(t *testing.T, n *network, h *host, ip string) {
	t.Helper()
	n.must("-n", h.NS, "addr", "flush", "dev", "eth0")
	n.must("-n", h.NS, "addr", "add", ip+"/24", "dev", "eth0")
	h.IP = ip
}

// recipeBin is a directory holding the loaderd and trainer the recipe
// calls, for its shells' PATH: $LOADERD_BIN (or clienttest's build) and
// $TRAINER_BIN (or cmd/trainer built here, once for this test).
func recipeBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	loaderd, err := filepath.Abs(clienttest.BinaryFor(t))
	if err != nil {
		t.Fatal(err)
	}
	trainer := os.Getenv("TRAINER_BIN")
	if trainer == "" {
		trainer = filepath.Join(dir, "trainer.bin")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", trainer, ".")
		cmd.Dir = filepath.Join("..", "..", "cmd", "trainer")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building cmd/trainer (set TRAINER_BIN to use a built one): %v\n%s", err, out)
		}
		t.Logf("built cmd/trainer in %v (TRAINER_BIN saves it)", time.Since(start).Round(time.Millisecond))
	} else if trainer, err = filepath.Abs(trainer); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"loaderd": loaderd, "trainer": trainer} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeRecipeData writes the dataset: recipeImages JPEGs, each its own
// colours, spread over recipeClasses classes, in one tar.
func writeRecipeData(t *testing.T, path string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := range recipeImages {
		img := image.NewRGBA(image.Rect(0, 0, recipeSide, recipeSide))
		for y := range recipeSide {
			for x := range recipeSide {
				img.Set(x, y, color.RGBA{byte(i), byte(x * 8), byte(y*8 + i%recipeClasses*60), 255})
			}
		}
		var j bytes.Buffer
		if err := jpeg.Encode(&j, img, nil); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("train/c%d/%04d.jpg", i%recipeClasses, i)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(j.Len()), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(j.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recipeShell is bash running block in dir, in namespace ns ("": this
// one), with bin first on PATH and env set. It stops at the first command
// that fails (set -e), as a reader would. Its process group is its own,
// so that killing it (ctx done, or the test's cleanup) takes the commands
// it started too; bash dies with the test, even a killed one.
func recipeShell(ctx context.Context, ns, dir, bin, block string, env ...string) *exec.Cmd {
	args := []string{"bash", "-e", "-o", "pipefail", "-c", block}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	// What the recipe reads, only as this test sets it: not from the
	// environment the test runs in.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "POOL", k == "HOST", k == "DATA", k == "ADDRS", k == "EPOCHS",
			strings.HasPrefix(k, "LOADERD_TLS_"), strings.HasPrefix(k, "LOADERD_TOKEN"):
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// checkRecipeCerts checks what the certs block made: each pool host's
// certificate for its address, the trainer's, both signed by ca.crt, and
// the token files. (The block hides openssl's messages.)
func checkRecipeCerts(t *testing.T, dir string, hosts []string) {
	t.Helper()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Fatalf("the %s block made no %s: %v", recipeCerts, name, err)
		}
		return b
	}
	parse := func(name string) *x509.Certificate {
		t.Helper()
		p, _ := pem.Decode(read(name))
		if p == nil {
			t.Fatalf("the %s block's %s is not PEM", recipeCerts, name)
		}
		c, err := x509.ParseCertificate(p.Bytes)
		if err != nil {
			t.Fatalf("the %s block's %s: %v", recipeCerts, name, err)
		}
		return c
	}
	roots := x509.NewCertPool()
	roots.AddCert(parse("ca.crt"))
	for _, h := range hosts {
		read(h + ".key")
		if _, err := parse(h + ".crt").Verify(x509.VerifyOptions{DNSName: h, Roots: roots}); err != nil {
			t.Errorf("%s.crt: %v", h, err)
		}
	}
	read("trainer.key")
	if _, err := parse("trainer.crt").Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("trainer.crt: %v", err)
	}
	token := strings.TrimSpace(string(read("token")))
	if tokens := string(read("tokens")); !strings.HasPrefix(tokens, token+" ") {
		t.Errorf("tokens %q does not start with the token %q", tokens, token)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// startRecipeHost runs the pool-host block as host ip (in namespace ns,
// "": this one) serving data, and waits until its daemon serves. The
// daemon is killed, with the shell, when the test ends.
func startRecipeHost(t *testing.T, ns, dir, bin, block, ip, data string) {
	t.Helper()
	log := &clienttest.LockedBuffer{}
	cmd := recipeShell(context.Background(), ns, dir, bin, block, "HOST="+ip, "DATA="+data)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("pool host %s, the end of its log:\n%s", ip, tail(log.String(), 20))
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "msg=serving"); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("pool host %s: the %s block exited before serving: %v\n%s", ip, recipePoolHost, cmd.ProcessState, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool host %s not serving after 30 s:\n%s", ip, log)
		}
	}
}
