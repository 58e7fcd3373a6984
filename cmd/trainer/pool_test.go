package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
)

// TestConsumePoolTLS reads one epoch through `trainer consume` from a pool
// of two daemons serving TLS with client certificates and a token: the
// flags reach the client, the pool spreads the epoch over both, and a
// wrong token is refused with the daemon's message.
func TestConsumePoolTLS(t *testing.T) {
	dir := t.TempDir()
	ca := clienttest.NewCA(t, "pool CA")
	caFile := ca.Write(t, dir, "ca")
	srvCert, srvKey := ca.Server(t).Write(t, dir, "server")
	cliCert, cliKey := ca.Issue(t, clienttest.LeafOptions{Name: "trainer", Client: true}).Write(t, dir, "client")
	tokens, token, bad := filepath.Join(dir, "tokens"), filepath.Join(dir, "token"), filepath.Join(dir, "bad")
	for f, s := range map[string]string{tokens: "tok-pool-0123456789 datasets=train\n", token: "tok-pool-0123456789\n", bad: "tok-wrong-0123456789\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []string
	for range 2 {
		d := clienttest.Start(t, "--dataset", "train=synthetic:200?seed=9", "--workers", "1", "--log-level", "info",
			"--listen", "127.0.0.1:0", "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", caFile, "--auth-tokens", tokens)
		addrs = append(addrs, d.TCPAddr(t))
	}
	args := func(tok string) []string {
		return []string{"consume", "--addr", strings.Join(addrs, ","), "--dataset", "train", "--batch", "10", "--json",
			"--tls-ca", caFile, "--tls-cert", cliCert, "--tls-key", cliKey, "--token-file", tok}
	}
	out, errs, code := runTrainer(t, args(token)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var res struct{ Images, Batches int64 }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Images != 200 || res.Batches != 20 {
		t.Fatalf("summary %s (%v): want 200 images in 20 batches", out, err)
	}
	if _, errs, code := runTrainer(t, args(bad)...); code == 0 || !strings.Contains(errs, "Unauthenticated") {
		t.Fatalf("a wrong token: exit %d\n%s", code, errs)
	}
}
