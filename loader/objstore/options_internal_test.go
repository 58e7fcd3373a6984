package objstore

import (
	"context"
	"testing"
	"time"
)

// A dataset's retry_timeout (Options.RetryTimeout) replaces the retry
// bound of its objects' client, and gets a client of its own.
func TestOptionsRetryTimeout(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	ctx := context.Background()
	base, err := getClient(ctx, Options{Endpoint: "http://127.0.0.1:1"}, DefaultRetry)
	if err != nil {
		t.Fatal(err)
	}
	c, err := getClient(ctx, Options{Endpoint: "http://127.0.0.1:1", RetryTimeout: 7 * time.Second}, DefaultRetry)
	if err != nil {
		t.Fatal(err)
	}
	if c.retry.Timeout != 7*time.Second || base.retry.Timeout != DefaultRetry.Timeout || c == base {
		t.Fatalf("timeouts %v and %v (want 7s and the default %v), same client %v", c.retry.Timeout, base.retry.Timeout, DefaultRetry.Timeout, c == base)
	}
}
