// Package s3test starts a real S3 server for tests: versitygw (pinned by
// scripts/s3-setup.sh) with its posix backend on a temporary directory,
// on loopback, and a proxy that injects faults between a client and it.
// It is for tests only; nothing else imports it.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Access and Secret are the test server's only credentials.
const (
	Access = "loaderdtest"
	Secret = "loaderdtestsecret"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Root     string // the posix backend: one directory per bucket
	client   *s3.Client
}

// Binary returns versitygw's path: on PATH, or where go install puts it.
func Binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(gopath, "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("s3test: versitygw is not installed (scripts/s3-setup.sh installs it): %w", err)
	}
	return p, nil
}

// Start starts versitygw for tb and stops it when tb ends. Without the
// binary the test is skipped, or fails where LOADERD_REQUIRE_S3=1 (CI):
// there a missing server must not pass for a passing test. It sets the
// AWS environment (credentials, region; no config files, no instance
// metadata) as the SDK's default chain reads it, for tb's duration.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("LOADERD_REQUIRE_S3") == "1" {
			tb.Fatalf("LOADERD_REQUIRE_S3=1: %v", err)
		}
		tb.Skipf("skipped: %v", err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": Access, "AWS_SECRET_ACCESS_KEY": Secret, "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true", "AWS_CA_BUNDLE": "",
	} {
		tb.Setenv(k, v)
	}
	s := &Server{Root: tb.TempDir()}
	var lastErr error
	for try := 0; try < 3; try++ { // a port picked free can be taken before versitygw binds it
		addr, err := freeAddr()
		if err != nil {
			tb.Fatal(err)
		}
		var log bytes.Buffer
		cmd := exec.Command(bin, "--access", Access, "--secret", Secret, "--port", addr, "posix", s.Root)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			tb.Fatalf("s3test: starting versitygw: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if lastErr = waitListening(addr, exited); lastErr == nil {
			tb.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			s.Endpoint = "http://" + addr
			s.client = s3.New(s3.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
				Credentials:                credentials.NewStaticCredentialsProvider(Access, Secret, ""),
				RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
				ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
			})
			return s
		}
		cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("%w; its output: %s", lastErr, log.String())
	}
	tb.Fatalf("s3test: versitygw did not start: %v", lastErr)
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string, exited <-chan error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after 20 s", addr)
}

// Client returns an S3 client of the server, with its credentials.
func (s *Server) Client() *s3.Client { return s.client }

// Bucket creates a bucket (a directory of the backend) and returns its name.
func (s *Server) Bucket(tb testing.TB, name string) string {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(s.Root, name), 0o755); err != nil {
		tb.Fatal(err)
	}
	return name
}

// Put uploads data as bucket/key through the S3 API, so the server
// records its ETag (the MD5), as S3 would.
func (s *Server) Put(tb testing.TB, bucket, key string, data []byte) {
	tb.Helper()
	_, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		tb.Fatalf("s3test: put s3://%s/%s: %v", bucket, key, err)
	}
}

// PutFile uploads a file as bucket/key.
func (s *Server) PutFile(tb testing.TB, bucket, key, file string) {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: f}); err != nil {
		tb.Fatalf("s3test: put s3://%s/%s: %v", bucket, key, err)
	}
}

// Delete removes bucket/key.
func (s *Server) Delete(tb testing.TB, bucket, key string) {
	tb.Helper()
	if _, err := s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
		tb.Fatalf("s3test: delete s3://%s/%s: %v", bucket, key, err)
	}
}
