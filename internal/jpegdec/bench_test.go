package jpegdec

import "testing"

// BenchmarkDecode decodes one 150×103 JPEG of each chroma subsampling
// with a reused Decoder.
func BenchmarkDecode(b *testing.B) {
	for _, ratio := range []string{"420", "422", "444"} {
		b.Run("ratio="+ratio, func(b *testing.B) {
			data := fixtures(b)["video-001.q50."+ratio+".jpeg"]
			var dec Decoder
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := dec.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
