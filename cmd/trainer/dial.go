package main

import (
	"flag"
	"net"
	"strings"

	"github.com/loaderd/loaderd/client"
)

// dialFlags are the flags that say how to reach the daemons: the address
// (one daemon, or a pool of them) and the credentials for TCP.
type dialFlags struct {
	creds  client.Credentials
	envErr error
}

// register adds the credential flags to fs, with the LOADERD_* variables
// as their defaults (Kubernetes mounts secrets as files and variables).
func (d *dialFlags) register(fs *flag.FlagSet) {
	d.creds, d.envErr = client.CredentialsFromEnv()
	fs.StringVar(&d.creds.CAFile, "tls-ca", d.creds.CAFile, "PEM bundle the daemons' certificates must chain to: TLS (default $LOADERD_TLS_CA)")
	fs.StringVar(&d.creds.CertFile, "tls-cert", d.creds.CertFile, "client certificate, for daemons with --tls-client-ca (default $LOADERD_TLS_CERT)")
	fs.StringVar(&d.creds.KeyFile, "tls-key", d.creds.KeyFile, "the client certificate's key (default $LOADERD_TLS_KEY)")
	fs.StringVar(&d.creds.ServerName, "tls-server-name", d.creds.ServerName, "name the daemons' certificates must carry (default each address's host; $LOADERD_TLS_SERVER_NAME)")
	fs.StringVar(&d.creds.TokenFile, "token-file", d.creds.TokenFile, "file holding a bearer token of the daemons' --auth-tokens (default $LOADERD_TOKEN_FILE; or $LOADERD_TOKEN)")
}

// remote reports whether addr is across a network: a pool of daemons, or
// one TCP daemon whose host is not loopback.
func remote(addr string) bool {
	if strings.Contains(addr, ",") || strings.HasPrefix(addr, "dns:") {
		return true
	}
	if strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "/") {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// dial connects to addr with the credentials.
func (d *dialFlags) dial(addr string) (*client.Client, error) {
	if d.envErr != nil {
		return nil, d.envErr
	}
	opts, err := d.creds.DialOptions(addr)
	if err != nil {
		return nil, err
	}
	return client.Dial(addr, opts...)
}
