// Package objstore makes objects in S3-compatible object storage local
// files, so that the sharded formats (tar, Arrow, Parquet) read them
// through a memory map exactly as they read files on disk.
//
// A dataset PATH of s3://BUCKET/KEY, s3://BUCKET/PREFIX/ (the objects
// directly under the prefix with the format's extension), or a key with
// glob characters (* ? [) or brace expansions ({000..009}, {a,b}) names
// one or more shards. Each is fetched whole into a Cache: written under a
// private name, flushed, checked against the object's size and ETag (its
// MD5 where the ETag is one), and only then renamed to a name that holds
// the ETag, so a file under a final name is always a complete, verified
// copy, whatever kill -9 interrupts. Later opens (later epochs, a restarted
// daemon) find the file and read nothing from the server.
//
// Open returns a Set instead: the objects resolved but not fetched, read
// with ranged GETs (ReadAt) while Start fills them into the cache in the
// background, the ones Want names first; the tar format opens s3:// shards
// this way so that the first batch does not wait for whole shards.
//
// Credentials, region and endpoint come from the AWS SDK's default chain:
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, AWS_PROFILE,
// ~/.aws/config and ~/.aws/credentials (AWS_CONFIG_FILE,
// AWS_SHARED_CREDENTIALS_FILE), web identity (EKS), instance metadata
// (EC2), AWS_ENDPOINT_URL_S3 and AWS_REGION. The options endpoint= (an
// S3-compatible server, addressed path-style) and region= override them
// per dataset.
//
// Requests are retried with capped exponential backoff and jitter on
// throttling (503 SlowDown), 5xx, connection resets and timeouts; a body
// that ends early (ErrShortBody) or stalls resumes with a ranged GET
// pinned to the ETag. Each attempt waits a bounded time for a response,
// a call that waits or retries logs a warning every few seconds, and an
// object that keeps failing fails for good after Retry.Timeout (30 s),
// across calls. The error names the bucket and key (*Error), and after
// retries the attempts and the last status or error (*RetryError). An
// object of no bytes is an error (ErrZeroByte), not an empty shard.
package objstore
