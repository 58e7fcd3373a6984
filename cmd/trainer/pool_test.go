package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/trainer"
)

// TestConsumePoolTLS reads one epoch through `trainer consume` from a pool
// of two daemons serving TLS with client certificates and a token: the
// flags reach the client, the pool spreads the epoch over both, and a
// wrong token is refused with the daemon's message.
func TestConsumePoolTLS(t *testing.T) {
	dir := t.TempDir()
	tf := clienttest.WriteTLS(t, dir)
	tokens, token, bad := filepath.Join(dir, "tokens"), filepath.Join(dir, "token"), filepath.Join(dir, "bad")
	for f, s := range map[string]string{tokens: "tok-pool-0123456789 datasets=train\n", token: "tok-pool-0123456789\n", bad: "tok-wrong-0123456789\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []string
	for range 2 {
		d := clienttest.Start(t, append(tf.DaemonArgs(), "--dataset", "train=synthetic:200?seed=9", "--workers", "1", "--auth-tokens", tokens)...)
		addrs = append(addrs, d.TCPAddr(t))
	}
	args := func(tok string) []string {
		return []string{"consume", "--addr", strings.Join(addrs, ","), "--dataset", "train", "--batch", "10", "--json",
			"--tls-ca", tf.CA, "--tls-cert", tf.ClientCert, "--tls-key", tf.ClientKey, "--token-file", tok}
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

// TestTrainValuesOnClient trains one epoch over a pool of two daemons with
// uint8 on the wire, normalised by the trainer (--values client, what auto
// picks for a pool), and again from one daemon normalising itself: the
// losses and the evaluation are equal to the last bit, since the floats
// the model sees are.
func TestTrainValuesOnClient(t *testing.T) {
	var addrs []string
	for range 2 {
		d := clienttest.Start(t, "--workers", "1", "--dataset", "train=synthetic:256", "--dataset", "val=synthetic:64?seed=3")
		addrs = append(addrs, d.Addr)
	}
	run := func(addr, values string) trainer.TrainResult {
		t.Helper()
		out, errs, code := runTrainer(t, "train", "--addr", addr, "--values", values, "--dataset", "train", "--eval", "val",
			"--model", "mlp", "--devices", "1", "--batch", "32", "--epochs", "1", "--json")
		if code != 0 {
			t.Fatalf("--addr %s --values %s: exit %d\n%s", addr, values, code, errs)
		}
		var res trainer.TrainResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Epochs) != 1 || res.Final() == nil {
			t.Fatalf("--addr %s --values %s: %v\n%s", addr, values, err, out)
		}
		return res
	}
	pool, one := run(strings.Join(addrs, ","), "auto"), run(addrs[0], "daemon")
	if !pool.ValuesOnClient || one.ValuesOnClient {
		t.Fatalf("values on the client: %t over the pool with auto, %t from one daemon with daemon; want true, false",
			pool.ValuesOnClient, one.ValuesOnClient)
	}
	p, o := pool.Epochs[0], one.Epochs[0]
	if p.Loss != o.Loss || p.Accuracy != o.Accuracy || pool.Final().Loss != one.Final().Loss {
		t.Fatalf("values on the client over a pool: loss %v acc %v eval %+v; on one daemon: loss %v acc %v eval %+v",
			p.Loss, p.Accuracy, pool.Final(), o.Loss, o.Accuracy, one.Final())
	}
}

func TestRemote(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:50051": false, "localhost:50051": false, "[::1]:50051": false, "unix:///run/l.sock": false,
		"10.0.0.11:50051": true, "node3:50051": true, "a:1,b:2": true, "dns:///pool:50051": true,
	} {
		if got := remote(addr); got != want {
			t.Errorf("remote(%q) = %t, want %t", addr, got, want)
		}
	}
}
