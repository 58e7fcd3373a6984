package options

import (
	"strings"
	"testing"
	"time"
)

// retry_timeout= reaches the object store's options; a bad one is an
// error naming the option.
func TestStoreRetryTimeout(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want time.Duration
		err  string
	}{
		{"s3://b/k.tar?endpoint=http://h:9000&retry_timeout=20s", 20 * time.Second, ""},
		{"s3://b/k.tar?region=eu-west-1", 0, ""},
		{"s3://b/k.tar?retry_timeout=soon", 0, "retry_timeout=soon: want a positive duration"},
		{"s3://b/k.tar?retry_timeout=-1s", 0, "retry_timeout=-1s"},
	} {
		o, err := Parse("tar", tc.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.spec, err)
		}
		so, err := o.Store()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want one containing %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || so.RetryTimeout != tc.want {
			t.Errorf("%s: Store() = %+v, %v; want RetryTimeout %v", tc.spec, so, err, tc.want)
		}
	}
}
