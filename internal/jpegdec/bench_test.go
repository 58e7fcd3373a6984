package jpegdec

import "testing"

func BenchmarkDecode420(b *testing.B) {
	data := fixtures(b)["video-001.q50.420.jpeg"]
	var dec Decoder
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
