package multinode

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/internal/server"
	_ "github.com/loaderd/loaderd/loader/format/tar"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// TestMain doubles as a node's daemon: `loaderd serve --unix SOCK
// --cache-dir DIR --dataset D` in a process of its own, as on a node.
func TestMain(m *testing.M) {
	if sock := os.Getenv("MULTINODE_UNIX"); sock != "" {
		cfg := server.Config{Unix: sock, CacheDir: os.Getenv("MULTINODE_CACHE"), Datasets: []string{os.Getenv("MULTINODE_DATASET")}, Workers: 1}
		cfg.EnsureDefaults()
		cfg.MemoryLimit = 256 << 20
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if err := server.Run(ctx, cfg, log, nil); err != nil {
			fmt.Fprintln(os.Stderr, "daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	nodes        = 2
	perNode      = 2 // LOCAL_WORLD_SIZE: GPUs, so ranks, per node
	shards       = 4
	perShard     = 12
	samples      = shards * perShard
	batch        = 4
	epochs       = 2
	classes      = 3
	imgSide      = 8
	bucket       = "multinode"
	torchrunPort = "29500"
)

func shard(t *testing.T, k int) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := range perShard {
		img := image.NewGray(image.Rect(0, 0, imgSide, imgSide))
		img.Pix[0], img.Pix[1] = byte(k), byte(i)
		var p bytes.Buffer
		png.Encode(&p, img)
		name := fmt.Sprintf("train/c%d/%d-%02d.png", i%classes, k, i)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(p.Len()), Typeflag: tar.TypeReg})
		tw.Write(p.Bytes())
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// startNode runs one node's daemon and returns its socket.
func startNode(t *testing.T, dir, dataset string) string {
	sock := filepath.Join(dir, "loaderd.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MULTINODE_UNIX="+sock, "MULTINODE_CACHE="+filepath.Join(dir, "cache"), "MULTINODE_DATASET="+dataset)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err // for the cleanup, which waits on it
			t.Fatalf("the daemon of %s exited: %v", dir, err)
		default:
		}
		if _, err := os.Stat(sock + ".fd"); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon on %s after 60 s", sock)
		}
	}
}

// torchrunEnv is what torchrun --nnodes 2 --nproc-per-node 2 gives
// local rank l of node n.
func torchrunEnv(n, l int) map[string]string {
	return map[string]string{
		"RANK": strconv.Itoa(n*perNode + l), "WORLD_SIZE": strconv.Itoa(nodes * perNode),
		"LOCAL_RANK": strconv.Itoa(l), "LOCAL_WORLD_SIZE": strconv.Itoa(perNode), "GROUP_RANK": strconv.Itoa(n),
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": torchrunPort,
	}
}

// TestTwoNodes: two daemons on two sockets, each caching the S3 shards
// for itself; four ranks, each reading only its torchrun environment,
// open their node's daemon with their global rank. Every epoch, the four
// slices together cover the dataset exactly once (the daemons agree on
// the permutation with no word between them), and epochs are reshuffled.
func TestTwoNodes(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, bucket)
	for k := range shards {
		srv.Put(t, bucket, fmt.Sprintf("train-%02d.tar", k), shard(t, k))
	}
	dataset := fmt.Sprintf("cifar=tar:s3://%s/train-{00..%02d}.tar?endpoint=%s", bucket, shards-1, srv.Endpoint)
	var sockets []string
	root := t.TempDir()
	for n := range nodes {
		// Each node's own directory: what a pod's emptyDir or a host's
		// /run/loaderd is.
		sockets = append(sockets, startNode(t, filepath.Join(root, fmt.Sprintf("node%d", n)), dataset))
	}

	seen := make([][]int, epochs) // seen[e][i]: times sample i was delivered in epoch e
	for e := range seen {
		seen[e] = make([]int, samples)
	}
	orders := make([][]int64, epochs) // rank 0's indices, per epoch
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, nodes*perNode)
	for n := range nodes {
		for l := range perNode {
			env := torchrunEnv(n, l)
			wg.Go(func() {
				if err := runRank(env, sockets, func(b *client.Batch, rank int) {
					mu.Lock()
					defer mu.Unlock()
					for _, i := range b.Indices {
						seen[b.Epoch][i]++
					}
					if rank == 0 {
						orders[b.Epoch] = append(orders[b.Epoch], b.Indices...)
					}
				}); err != nil {
					errs <- fmt.Errorf("RANK=%s: %w", env["RANK"], err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for e := range seen {
		for i, c := range seen[e] {
			if c != 1 {
				t.Errorf("epoch %d: sample %d delivered %d times, want exactly once", e, i, c)
			}
		}
	}
	if fmt.Sprint(orders[0]) == fmt.Sprint(orders[1]) {
		t.Errorf("rank 0 got the same order in both epochs: %v", orders[0])
	}
	for n := range nodes {
		m, _ := filepath.Glob(filepath.Join(root, fmt.Sprintf("node%d", n), "cache", "*", bucket, "*", "train-*.tar"))
		if len(m) != shards {
			t.Errorf("node %d cached %d shards, want %d: %v", n, len(m), shards, m)
		}
	}
}

// runRank is one training process: torchrun's variables alone say which
// daemon (its node's) and which slice (its global rank).
func runRank(env map[string]string, sockets []string, got func(*client.Batch, int)) error {
	// The trainer reads the same variables (trainer/dist.FromEnv, tested
	// there); this module cannot link the trainer, so it reads them itself.
	var rank, world, localRank, localWorld int
	for _, v := range []struct {
		name string
		to   *int
	}{{"RANK", &rank}, {"WORLD_SIZE", &world}, {"LOCAL_RANK", &localRank}, {"LOCAL_WORLD_SIZE", &localWorld}} {
		n, err := strconv.Atoi(env[v.name])
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		*v.to = n
	}
	// Ranks are numbered node by node: the node is (RANK-LOCAL_RANK)/LOCAL_WORLD_SIZE,
	// torchrun's GROUP_RANK. On a real cluster every node's daemon sits at
	// the same path; here the node picks the directory.
	node := (rank - localRank) / localWorld
	if strconv.Itoa(node) != env["GROUP_RANK"] {
		return fmt.Errorf("node %d from RANK, LOCAL_RANK and LOCAL_WORLD_SIZE, but GROUP_RANK=%s", node, env["GROUP_RANK"])
	}
	cl, err := client.Dial("unix://" + sockets[node])
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := cl.Open(ctx, client.StreamConfig{Dataset: "cifar", Rank: rank, World: world, BatchSize: batch,
		Seed: 42, Epochs: epochs, SharedMemory: true, Name: "rank" + env["RANK"]})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		b, err := s.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		got(b, rank)
		b.Release()
	}
}
