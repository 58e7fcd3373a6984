package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Options are a dataset's own settings, from its ?endpoint=&region=.
type Options struct {
	Endpoint string // an S3-compatible server, e.g. http://127.0.0.1:9000; "": the SDK's (AWS, or AWS_ENDPOINT_URL_S3)
	Region   string // "": the SDK's (AWS_REGION, ~/.aws/config), else us-east-1
}

// OptionKeys are the dataset options objstore reads.
var OptionKeys = []string{"endpoint", "region"}

// Retry bounds how hard a request is tried. The zero value is not
// useful; DefaultRetry is what the daemon uses.
type Retry struct {
	Attempts int           // tries per request, the first included
	MaxDelay time.Duration // backoff cap: attempt k waits rand[0, min(MaxDelay, Base·2^k))
	Base     time.Duration
	// Stall fails an attempt that receives nothing for this long: a
	// response that never starts, or a body that stops flowing. Without
	// it a half-dead connection would hold a shard fill for good.
	Stall time.Duration
}

// DefaultRetry rides out a few seconds of throttling or a restarting
// server: 8 attempts, backoff up to 5 s, 30 s without progress.
var DefaultRetry = Retry{Attempts: 8, Base: 100 * time.Millisecond, MaxDelay: 5 * time.Second, Stall: 30 * time.Second}

// Error is a request that failed for good: after its retries, or at
// once when retrying cannot help (a missing object, denied access). It
// names the object as s3://BUCKET/KEY.
type Error struct {
	Op  string // head, list, get
	URL string
	Err error // wraps fs.ErrNotExist for a missing bucket, key or match
}

func (e *Error) Error() string { return fmt.Sprintf("objstore: %s %s: %v", e.Op, e.URL, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// client is an S3 client for one endpoint and region, with our retries.
type client struct {
	s3    *s3.Client
	retry Retry
	host  string // names the endpoint in cache paths
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*client{}
)

// getClient returns the process's client for opts, made once: the SDK
// reads credentials files and may ask the instance metadata service, not
// something to repeat per dataset.
func getClient(ctx context.Context, opts Options, r Retry) (*client, error) {
	key := fmt.Sprintf("%s\x00%s\x00%v", opts.Endpoint, opts.Region, r)
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c := clients[key]; c != nil {
		return c, nil
	}
	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	loadOpts = append(loadOpts,
		config.WithHTTPClient(httpClient(r.Stall)),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = r.Attempts
				o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) { return r.backoff(attempt), nil })
				// The default token bucket stops retrying after a burst
				// of failures, process-wide: a throttled bucket would
				// fail every shard at once instead of backing off.
				o.RateLimiter = ratelimit.None
			})
		}))
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3-compatible servers rarely care; the SDK insists
	}
	host := "s3.amazonaws.com"
	cl := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
			// Servers on an address (loopback, a cluster service) have
			// no bucket subdomains.
			o.UsePathStyle = true
		}
		if o.BaseEndpoint != nil {
			if u, err := url.Parse(*o.BaseEndpoint); err == nil && u.Host != "" {
				host = u.Host
			}
		}
		// We check size and MD5 ourselves; the SDK's CRC trailers are
		// not understood by every S3-compatible server.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	c := &client{s3: cl, retry: r, host: host}
	clients[key] = c
	return c, nil
}

// httpClient is the SDK's client (which honours AWS_CA_BUNDLE) with
// bounded connection set-up and time to the first response byte.
func httpClient(stall time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = min(stall, 10*time.Second) }).
		WithTransportOptions(func(t *http.Transport) {
			t.ResponseHeaderTimeout = stall
			t.MaxIdleConnsPerHost = 16
		})
}

// backoff is full jitter: rand[0, min(MaxDelay, Base·2^attempt)).
func (r Retry) backoff(attempt int) time.Duration {
	d := r.MaxDelay
	if attempt < 30 {
		d = min(d, r.Base<<attempt)
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// fail makes err an *Error, wrapping fs.ErrNotExist for what does not exist.
func fail(op, u string, err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var nb *types.NoSuchBucket
	var api smithy.APIError
	switch {
	case errors.As(err, &nsk), errors.As(err, &nf), errors.As(err, &nb),
		errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NoSuchBucket" || api.ErrorCode() == "NotFound"):
		// The SDK's text (request IDs, "https response error") says
		// less than the code.
		code := "NotFound"
		if errors.As(err, &api) {
			code = api.ErrorCode()
		}
		err = fmt.Errorf("%w (%s)", fs.ErrNotExist, code)
	case errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed":
		err = fmt.Errorf("the object was replaced while it was being fetched (412 %s): open the dataset again for the new version", api.ErrorCode())
	}
	return &Error{Op: op, URL: u, Err: err}
}

// head returns the object's size and ETag.
func (c *client) head(ctx context.Context, bucket, key string) (Object, error) {
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return Object{}, fail("head", Scheme+bucket+"/"+key, err)
	}
	return Object{Bucket: bucket, Key: key, Size: aws.ToInt64(out.ContentLength), ETag: trimETag(aws.ToString(out.ETag))}, nil
}

// list returns the objects under prefix; with delim "/" only those
// directly under it.
func (c *client) list(ctx context.Context, bucket, prefix, delim string) ([]Object, error) {
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix}
	if delim != "" {
		in.Delimiter = &delim
	}
	var out []Object
	p := s3.NewListObjectsV2Paginator(c.s3, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fail("list", Scheme+bucket+"/"+prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, Object{Bucket: bucket, Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: trimETag(aws.ToString(o.ETag))})
		}
	}
	return out, nil
}

func trimETag(e string) string { return strings.Trim(e, `"`) }

// download writes the object's bytes to w, in order. A body that ends
// early, resets or stalls is resumed where it stopped, with If-Match on
// the ETag so that a replaced object fails instead of mixing two
// versions; the SDK retries each request's own failures (throttling,
// 5xx, connection errors), and this loop retries what breaks afterwards,
// while the body is read.
//
// It reports whether the object is encrypted with KMS or a customer key:
// then its ETag is not the MD5 of its bytes, even when it looks like one.
func (c *client) download(ctx context.Context, o Object, w io.Writer) (encrypted bool, err error) {
	return c.readRange(ctx, o, 0, o.Size, w)
}

// readRange is download for bytes [off, end) of the object: a ranged GET
// (several, if the body breaks), with the same retries.
func (c *client) readRange(ctx context.Context, o Object, off, end int64, w io.Writer) (encrypted bool, err error) {
	var last error
	for attempt := 0; attempt < c.retry.Attempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(c.retry.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return encrypted, fail("get", o.URL(), ctx.Err())
			case <-t.C:
			}
		}
		n, err := c.getFrom(ctx, o, off, end, w, &encrypted)
		off += n
		if err == nil && off == end {
			return encrypted, nil
		}
		if err == nil {
			err = fmt.Errorf("body ended at byte %d of %d", off, end)
		}
		var req requestError
		if errors.As(err, &req) || ctx.Err() != nil || errors.Is(err, errWrite) {
			// The SDK already retried the request as far as it may
			// (and a 404, 403 or 412 will not heal); a write error is
			// ours.
			return encrypted, fail("get", o.URL(), err)
		}
		last = err
	}
	return encrypted, fail("get", o.URL(), fmt.Errorf("after %d attempts: %w", c.retry.Attempts, last))
}

var errWrite = errors.New("writing the cache file")

// requestError is a GET that failed before its body: the SDK's retryer
// has had its turn.
type requestError struct{ error }

func (e requestError) Unwrap() error { return e.error }

// errStalled cancels an attempt whose body stopped flowing.
var errStalled = errors.New("no data received within the stall timeout")

// copyBufs holds getFrom's buffers: fresh memory is slow to touch here,
// and a ranged read of one member must not cost a new 256 KiB.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// getFrom GETs bytes [off, end) and copies them to w, returning how many
// it wrote.
func (c *client) getFrom(ctx context.Context, o Object, off, end int64, w io.Writer, encrypted *bool) (int64, error) {
	if off >= end && o.Size > 0 {
		return 0, nil
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in := &s3.GetObjectInput{Bucket: &o.Bucket, Key: &o.Key}
	if o.ETag != "" {
		in.IfMatch = aws.String(`"` + o.ETag + `"`)
	}
	if end < o.Size {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, end-1))
	} else if off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := c.s3.GetObject(actx, in)
	if err != nil {
		return 0, requestError{err}
	}
	if out.SSECustomerAlgorithm != nil || strings.HasPrefix(string(out.ServerSideEncryption), "aws:kms") {
		*encrypted = true
	}
	defer out.Body.Close()
	// A watchdog, reset by every read that brings data: the transport's
	// timeouts end at the response header.
	dog := time.AfterFunc(c.retry.Stall, func() { cancel(errStalled) })
	defer dog.Stop()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		k, rerr := out.Body.Read(buf)
		if k > 0 {
			dog.Reset(c.retry.Stall)
			if n+int64(k) > end-off {
				return n, fmt.Errorf("body longer than the %d bytes asked for", end-off)
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("%w: %w", errWrite, err)
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
				rerr = fmt.Errorf("%w: %w", cause, rerr)
			}
			return n, rerr
		}
	}
}
