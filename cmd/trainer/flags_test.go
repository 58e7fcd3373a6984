package main

import "testing"

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"2GiB", 2 << 30, true},
		{"1.5G", 3 << 29, true},
		{" 512 MiB ", 512 << 20, true},
		{"64K", 64 << 10, true},
		{"1TiB", 1 << 40, true},
		{"7B", 7, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"-1", 0, false},
		{"2GB", 0, false},
		{"1e9T", 0, false},
	} {
		got, err := parseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
