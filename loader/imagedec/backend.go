package imagedec

import (
	"fmt"
	"log/slog"
	"sync"
)

// Backend is the JPEG decoder a Decoder uses. Other formats always go
// through Go's decoders.
type Backend uint8

const (
	// GoJPEG is Go's standard library image/jpeg: pure Go, everywhere;
	// its chroma upsampling differs from libjpeg's, and it allocates its
	// decoder state and the image for every image (TestDecodeAllocs).
	GoJPEG Backend = iota
	// TurboJPEG is libjpeg-turbo's TurboJPEG API (libturbojpeg.so.0),
	// loaded at run time with purego, set to decode as PIL does (accurate
	// integer IDCT, fancy upsampling): the same u8 values as PIL's
	// Image.open(f).convert("RGB") with the same libjpeg-turbo release.
	TurboJPEG
)

func (b Backend) String() string {
	switch b {
	case GoJPEG:
		return "go"
	case TurboJPEG:
		return "turbo"
	}
	return fmt.Sprintf("Backend(%d)", uint8(b))
}

var fallbackOnce sync.Once

// ChooseBackend resolves a dataset's decoder= option: "turbo" needs the
// library (ErrNoTurbo without it), "go" is the Go decoder, and "" (the
// default) is turbo where the library loads and Go elsewhere, logged once
// per process.
func ChooseBackend(name string) (Backend, error) {
	switch name {
	case "go":
		return GoJPEG, nil
	case "turbo":
		if _, err := loadTurbo(); err != nil {
			return GoJPEG, fmt.Errorf("decoder=turbo: %w", err)
		}
		return TurboJPEG, nil
	case "":
		if _, err := loadTurbo(); err != nil {
			fallbackOnce.Do(func() {
				slog.Warn("imagedec: JPEG decoding falls back to the Go decoder, whose pixels differ slightly from PIL's", "err", err)
			})
			return GoJPEG, nil
		}
		return TurboJPEG, nil
	}
	return GoJPEG, fmt.Errorf("imagedec: decoder=%s: want turbo or go", name)
}

// TurboAvailable reports whether libturbojpeg loads here, and why not.
func TurboAvailable() error {
	_, err := loadTurbo()
	return err
}

// TurboPath returns the file libturbojpeg was loaded from, "" when it
// was not.
func TurboPath() string {
	if l, err := loadTurbo(); err == nil {
		return l.path
	}
	return ""
}

// CropAvailable reports whether decode-and-crop (libjpeg.so.62, crop.go)
// loads here, and why not.
func CropAvailable() error {
	_, err := loadCrop()
	return err
}

// cropPath returns the file libjpeg.so.62 was loaded from, "" when not.
func cropPath() string {
	if l, err := loadCrop(); err == nil {
		return l.path
	}
	return ""
}
