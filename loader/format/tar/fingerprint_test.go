package tar

import (
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/objstore"
)

// TestRemoteFingerprint: s3:// shards fingerprint as the same shards on
// local disk, indexed by a header scan or by sidecars; fetched whole into
// the cache (index=whole), the same whatever the cache's directory.
func TestRemoteFingerprint(t *testing.T) {
	e := newRemoteEnv(t)
	noFills(t)
	fp := func(spec string) string {
		t.Helper()
		f, err := loader.Fingerprint(openT(t, spec))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	local := fp(e.dir)
	if got := fp(e.url + "&index=scan"); got != local {
		t.Errorf("scanned: %s, local %s", got, local)
	}
	for k := range e.shards {
		e.putSidecar(t, k, k)
	}
	if got := fp(e.url); got != local {
		t.Errorf("from sidecars: %s, local %s", got, local)
	}
	whole := fp(e.url + "&index=whole")
	objstore.SetCache(t.TempDir(), 0) // another host's cache
	if got := fp(e.url + "&index=whole"); got != whole {
		t.Errorf("index=whole in another cache: %s, in the first %s", got, whole)
	}
}
