package arrow

import (
	"bytes"
	"image"
	"image/png"
	"path/filepath"
	"testing"

	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// fieldsFile writes loadertest's fields fixture as an Arrow file of 10
// rows, 4×4 grey PNGs, in two record batches; it returns its path.
func fieldsFile(t *testing.T) string {
	png4 := func(i int) []byte {
		g := image.NewGray(image.Rect(0, 0, 4, 4))
		g.Pix[0] = uint8(i)
		var b bytes.Buffer
		if err := png.Encode(&b, g); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	path := filepath.Join(t.TempDir(), "f.arrow")
	writeIPC(t, path, loadertest.FieldsSchema, loadertest.FieldsColumns(0, 4, png4), loadertest.FieldsColumns(4, 10, png4))
	return path
}

func TestArrowFields(t *testing.T) {
	loadertest.CheckFields(t, "arrow:"+fieldsFile(t)+"?label=labels&fields=caption,meta&size=4x4")
}

func TestArrowFieldErrors(t *testing.T) {
	loadertest.CheckFieldErrors(t, "arrow", fieldsFile(t), "size=4x4", "want binary or string")
}
