package tar

import (
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestTarUnsafeMemberNames: a member whose name is absolute or climbs out
// with "..", in either layout, fails the open naming it. Taken as it
// came, train/../../../etc/evil/0.png made a class "..": every label
// shifted, silently.
func TestTarUnsafeMemberNames(t *testing.T) {
	png := loadertest.Fixture(t, "img/rgb.png")
	for _, bad := range []string{"train/../../../etc/evil/0.png", "/abs/cat/0.png", "train/cat/../0.png", "../k1.png"} {
		path := filepath.Join(t.TempDir(), "x.tar")
		writeTar(t, path, entry{name: "train/cat/0.png", data: png}, entry{name: "train/dog/1.png", data: png},
			entry{name: bad, data: png}, entry{name: "k0.cls", data: []byte("0")}, entry{name: "k0.png", data: png})
		_, err := open(path)
		loadertest.WantRecordError(t, err, loader.ErrCorrupt, "x.tar("+bad+")")
	}
}

// TestTarMaxBytes: a member over maxbytes= is refused before it is
// decoded, naming it; the default lets an ordinary image through.
func TestTarMaxBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.tar")
	writeTar(t, path, entry{name: "train/c/0.png", data: loadertest.Fixture(t, "img/rgb.png")}, // 88 bytes
		entry{name: "train/c/1.jpg", data: loadertest.Fixture(t, "img/rgb.jpg")}, // 645 bytes
		entry{name: "train/d/2.png", data: loadertest.Fixture(t, "img/rgb.png")})
	scratch := make([]byte, 8*6*3)
	src, err := open(path + "?maxbytes=100")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, _, err := src.Sample(0, scratch); err != nil {
		t.Fatal(err)
	}
	_, _, err = src.Sample(1, scratch)
	loadertest.WantRecordError(t, err, imagedec.ErrTooLarge, "x.tar(train/c/1.jpg)")
	_, err = open(path + "?maxbytes=50") // the first member gives the size
	loadertest.WantRecordError(t, err, imagedec.ErrTooLarge, "x.tar(train/c/0.png)")
	src, err = open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, _, err := src.Sample(1, scratch); err != nil {
		t.Fatal(err)
	}
	loadertest.CheckOpenErrors(t, map[string]string{"tar:" + path + "?maxbytes=-5": "maxbytes=-5"})
}
