package objstore_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/internal/convert"
	"github.com/loaderd/loaderd/loader"
	_ "github.com/loaderd/loaderd/loader/format/arrow"
	_ "github.com/loaderd/loaderd/loader/format/parquet"
	_ "github.com/loaderd/loaderd/loader/format/tar"
	"github.com/loaderd/loaderd/loader/objstore"
)

// pngImage is an 8×8 image whose pixels encode (shard, i).
func pngImage(t *testing.T, shard, i int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for k := range img.Pix {
		img.Pix[k] = byte(shard*31 + i*7 + k)
		if k%4 == 3 {
			img.Pix[k] = 255
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarShard writes one shard: folder layout train/CLASS/N.png, or
// WebDataset N.png + N.cls.
func tarShard(t *testing.T, shard int, webdataset bool) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	for i := range 6 {
		key := fmt.Sprintf("s%d-%02d", shard, i)
		if webdataset {
			add(key+".png", pngImage(t, shard, i))
			add(key+".cls", []byte(fmt.Sprint(i%3)))
		} else {
			add(fmt.Sprintf("train/%s/%s.png", []string{"bird", "cat", "dog"}[i%3], key), pngImage(t, shard, i))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameSamples: two sources hold the same samples, labels and classes.
func sameSamples(t *testing.T, remote, local string) {
	t.Helper()
	r, err := loader.Open(remote)
	if err != nil {
		t.Fatalf("%s: %v", remote, err)
	}
	defer r.Close()
	l, err := loader.Open(local)
	if err != nil {
		t.Fatalf("%s: %v", local, err)
	}
	defer l.Close()
	if r.Len() != l.Len() || r.Len() == 0 || r.Spec() != l.Spec() || fmt.Sprint(r.Classes()) != fmt.Sprint(l.Classes()) {
		t.Fatalf("%s: %d samples %v %v; local %d %v %v", remote, r.Len(), r.Spec(), r.Classes(), l.Len(), l.Spec(), l.Classes())
	}
	bufR, bufL := make([]byte, r.Spec().Bytes()), make([]byte, l.Spec().Bytes())
	for i := range r.Len() {
		lr, pr, err1 := r.Sample(i, bufR)
		ll, pl, err2 := l.Sample(i, bufL)
		if err1 != nil || err2 != nil || lr != ll || !bytes.Equal(pr, pl) {
			t.Fatalf("%s: sample %d: label %d vs %d, pixels equal %v, %v %v", remote, i, lr, ll, bytes.Equal(pr, pl), err1, err2)
		}
	}
	if !strings.HasPrefix(r.String(), strings.SplitN(remote, "?", 2)[0]) {
		t.Fatalf("String() = %q, want it to name %q", r.String(), remote)
	}
}

// TestFormatsOverS3: tar (image-folder and WebDataset layouts), Arrow and
// Parquet shards opened as FORMAT:s3://… read exactly what the same
// files read locally; a missing object is an error naming it.
func TestFormatsOverS3(t *testing.T) {
	e := newEnv(t, 0)
	objstore.SetCache(t.TempDir(), 0)
	objstore.SetRetry(fastRetry)
	t.Cleanup(func() { objstore.SetCache("", 0); objstore.SetRetry(objstore.DefaultRetry) })
	b := e.srv.Bucket(t, "dset")
	local := t.TempDir()
	for _, layout := range []string{"folder", "wds"} {
		os.MkdirAll(filepath.Join(local, layout), 0o755)
		for k := range 3 {
			data := tarShard(t, k, layout == "wds")
			name := fmt.Sprintf("%s/train-%03d.tar", layout, k)
			e.srv.Put(t, b, name, data)
			if err := os.WriteFile(filepath.Join(local, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ep := "endpoint=" + e.px.URL
	sameSamples(t, "tar:s3://dset/folder/train-{000..002}.tar?"+ep, "tar:"+local+"/folder")
	sameSamples(t, "tar:s3://dset/wds/?"+ep+"&layout=webdataset", "tar:"+local+"/wds?layout=webdataset")
	sameSamples(t, "tar:s3://dset/wds/train-00[12].tar?"+ep, "tar:"+local+"/wds/train-00[12].tar")

	// Arrow: what convert writes, in 3 parts.
	if _, err := convert.Run(context.Background(), convert.Options{From: "tar:" + local + "/folder", To: "arrow:" + local + "/arrow", Shard: 7}); err != nil {
		t.Fatal(err)
	}
	parts, _ := filepath.Glob(local + "/arrow/*.arrow")
	for _, p := range parts {
		e.srv.PutFile(t, b, "arrow/"+filepath.Base(p), p)
	}
	sameSamples(t, "arrow:s3://dset/arrow/?"+ep, "arrow:"+local+"/arrow")

	// Parquet, as Hugging Face stores images.
	src, err := loader.Open("tar:" + local + "/folder")
	if err != nil {
		t.Fatal(err)
	}
	var pq bytes.Buffer
	w, err := convert.NewParquetWriter(&pq, "img", "label", src.Classes(), 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Len() {
		l, _ := src.(loader.Labeler).Label(i)
		if err := w.Write(pngImage(t, int(i/6), int(i%6)), "", int64(l)); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	e.srv.Put(t, b, "hf/train-00000-of-00001.parquet", pq.Bytes())
	os.WriteFile(local+"/train.parquet", pq.Bytes(), 0o644)
	sameSamples(t, "parquet:s3://dset/hf/train-*.parquet?"+ep, "parquet:"+local+"/train.parquet")

	_, err = loader.Open("tar:s3://dset/folder/train-{000..003}.tar?" + ep)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://dset/folder/train-003.tar") {
		t.Fatalf("a missing shard: %v, want fs.ErrNotExist naming s3://dset/folder/train-003.tar", err)
	}
	if _, err := loader.Open("tar:s3://dset/folder/?" + ep + "&endpont=x"); err == nil || !strings.Contains(err.Error(), `unknown option "endpont"`) {
		t.Fatalf("a misspelt option: %v", err)
	}
}
