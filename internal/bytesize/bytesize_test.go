package bytesize

import "testing"

func TestFormatParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		text string
	}{
		{"0", 0, "0 B"}, {"1023", 1023, "1023 B"}, {"1KiB", 1 << 10, "1.0 KiB"}, {"1.5M", 3 << 19, "1.5 MiB"},
		{"2GiB", 2 << 30, "2.00 GiB"}, {" 3 G ", 3 << 30, "3.00 GiB"}, {"1TiB", 1 << 40, "1024.00 GiB"},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if s := Format(got); s != c.text {
			t.Errorf("Format(%d) = %q, want %q", got, s, c.text)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1PiB", "9e30"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
