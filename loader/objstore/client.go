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
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	// RetryTimeout replaces Retry.Timeout for this dataset's objects
	// (the dataset option retry_timeout=20s); 0 keeps the default.
	RetryTimeout time.Duration
}

// OptionKeys are the dataset options objstore reads.
var OptionKeys = []string{"endpoint", "region", "retry_timeout"}

// Retry bounds how hard a request is tried. The zero value is not
// useful; DefaultRetry is what the daemon uses.
type Retry struct {
	// Attempts is the tries per call, the first included, that bring
	// nothing; an attempt whose body brought bytes before it broke
	// resumes at once and does not count (Timeout still bounds it).
	Attempts int
	MaxDelay time.Duration // backoff cap: attempt k waits rand[0, min(MaxDelay, Base·2^k))
	Base     time.Duration
	// Stall fails an attempt that receives nothing for this long: a
	// response that never starts, or a body that stops flowing. Without
	// it a half-dead connection would hold a shard fill for good.
	Stall time.Duration
	// Timeout bounds the time one object may keep failing, across calls:
	// a call ends with a *RetryError once the object has failed for this
	// long without a success (or an attempt that brought bytes), and
	// later calls on it make a single attempt until one succeeds. An
	// attempt's wait for a response is cut to what is left of it (not
	// below a tenth of it), so a call ends within about 1.1 Timeout.
	// 0: no bound but Attempts.
	Timeout time.Duration
	// Report is how long a call waits for a response or retries before it
	// logs (a warning naming the object, the attempts and the last
	// error), and then how often. 0: no such lines.
	Report time.Duration
}

// DefaultRetry rides out a few seconds of throttling or a restarting
// server: 8 attempts, backoff up to 5 s, 10 s without a response or
// body progress, an object failing for 30 s fails for good, a line
// logged every 5 s while a call waits or retries.
var DefaultRetry = Retry{Attempts: 8, Base: 100 * time.Millisecond, MaxDelay: 5 * time.Second, Stall: 10 * time.Second,
	Timeout: 30 * time.Second, Report: 5 * time.Second}

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

	mu      sync.Mutex
	streaks map[string]*streak // objects failing, by URL (retry.go)
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*client{}
)

// getClient returns the process's client for opts, made once: the SDK
// reads credentials files and may ask the instance metadata service, not
// something to repeat per dataset.
func getClient(ctx context.Context, opts Options, r Retry) (*client, error) {
	if opts.RetryTimeout > 0 {
		r.Timeout = opts.RetryTimeout
	}
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
		// One try per SDK call: retrying (retry.go) retries, so that it
		// can count the attempts, bound their time and report them.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }))
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
	c := &client{s3: cl, retry: r, host: host, streaks: map[string]*streak{}}
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
	var o Object
	err := c.retrying(ctx, "head", Scheme+bucket+"/"+key, func(ctx context.Context, wait time.Duration, _ *call) (bool, error) {
		actx, cancel := noResponse(ctx, wait)
		defer cancel()
		out, err := c.s3.HeadObject(actx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return false, attemptErr(ctx, actx, err)
		}
		o = Object{Bucket: bucket, Key: key, Size: aws.ToInt64(out.ContentLength), ETag: trimETag(aws.ToString(out.ETag))}
		return false, nil
	})
	return o, err
}

// list returns the objects under prefix; with delim "/" only those
// directly under it.
func (c *client) list(ctx context.Context, bucket, prefix, delim string) ([]Object, error) {
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix}
	if delim != "" {
		in.Delimiter = &delim
	}
	var out []Object
	for {
		var page *s3.ListObjectsV2Output
		err := c.retrying(ctx, "list", Scheme+bucket+"/"+prefix, func(ctx context.Context, wait time.Duration, _ *call) (bool, error) {
			actx, cancel := noResponse(ctx, wait)
			defer cancel()
			var err error
			if page, err = c.s3.ListObjectsV2(actx, in); err != nil {
				return false, attemptErr(ctx, actx, err)
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out = append(out, Object{Bucket: bucket, Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: trimETag(aws.ToString(o.ETag))})
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextContinuationToken) == "" {
			return out, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

func trimETag(e string) string { return strings.Trim(e, `"`) }

// download writes the object's bytes to w, in order. A body that ends
// early, resets or stalls is resumed where it stopped, with If-Match on
// the ETag so that a replaced object fails instead of mixing two
// versions; retrying (retry.go) retries and bounds it all.
//
// It reports whether the object is encrypted with KMS or a customer key:
// then its ETag is not the MD5 of its bytes, even when it looks like one.
func (c *client) download(ctx context.Context, o Object, w io.Writer) (encrypted bool, err error) {
	return c.readRange(ctx, o, 0, o.Size, w)
}

// readRange is download for bytes [off, end) of the object: a ranged GET
// (several, if the body breaks), with the same retries.
func (c *client) readRange(ctx context.Context, o Object, off, end int64, w io.Writer) (encrypted bool, err error) {
	if off >= end {
		return false, nil
	}
	err = c.retrying(ctx, "get", o.URL(), func(ctx context.Context, wait time.Duration, st *call) (bool, error) {
		n, err := c.getFrom(ctx, o, off, end, w, &encrypted, wait, st)
		off += n
		return n > 0, err
	})
	return encrypted, err
}

var errWrite = errors.New("writing the cache file")

// errStalled cancels an attempt whose body stopped flowing.
var errStalled = errors.New("no data received within the stall timeout")

// copyBufs holds getFrom's buffers: fresh memory is slow to touch here,
// and a ranged read of one member must not cost a new 256 KiB.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// getFrom GETs bytes [off, end) and copies them to w, returning how many
// it wrote; fewer than asked is an error (ErrShortBody). wait bounds the
// wait for the response, Stall each wait for body bytes after it.
func (c *client) getFrom(ctx context.Context, o Object, off, end int64, w io.Writer, encrypted *bool, wait time.Duration, st *call) (int64, error) {
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
	// A watchdog, first on the response, then reset by every read that
	// brings data: the transport's timeouts end at the response header.
	noAnswer := fmt.Errorf("%w within %v", errNoResponse, wait.Round(time.Millisecond))
	var answered atomic.Bool
	dog := time.AfterFunc(wait, func() {
		if answered.Load() {
			cancel(errStalled)
		} else {
			cancel(noAnswer)
		}
	})
	defer dog.Stop()
	out, err := c.s3.GetObject(actx, in)
	if err != nil {
		return 0, attemptErr(ctx, actx, err)
	}
	defer out.Body.Close()
	if out.SSECustomerAlgorithm != nil || strings.HasPrefix(string(out.ServerSideEncryption), "aws:kms") {
		*encrypted = true
	}
	st.setStreaming(true)
	defer st.setStreaming(false)
	answered.Store(true)
	dog.Reset(c.retry.Stall)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	want := end - off
	var n int64
	for {
		k, rerr := out.Body.Read(buf)
		if k > 0 {
			dog.Reset(c.retry.Stall)
			if n+int64(k) > want {
				return n, bodyError{fmt.Errorf("body longer than the %d bytes asked for", want)}
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("%w: %w", errWrite, err)
			}
			n += int64(k)
		}
		if rerr == io.EOF && n == want {
			return n, nil
		}
		if rerr != nil {
			if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
				rerr = fmt.Errorf("%w: %w", cause, rerr)
			}
			if n < want && (rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF)) {
				return n, shortBody(n, want, off, rerr)
			}
			return n, bodyError{rerr}
		}
	}
}
