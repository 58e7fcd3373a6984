package server

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
)

// validateSecurity checks the TCP listener's security flags: plaintext is
// for loopback only unless the operator says otherwise.
func (c *Config) validateSecurity() []error {
	var errs []error
	tls := c.TLSCert != "" || c.TLSKey != ""
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		errs = append(errs, fmt.Errorf("--tls-cert needs --tls-key, the certificate's private key"))
	case c.TLSKey != "" && c.TLSCert == "":
		errs = append(errs, fmt.Errorf("--tls-key needs --tls-cert, the key's certificate"))
	}
	if c.TLSClientCA != "" && !tls {
		errs = append(errs, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked in the TLS handshake"))
	}
	if c.InsecureTCP && tls {
		errs = append(errs, fmt.Errorf("--insecure-tcp and --tls-cert at once: serve TLS or plaintext, not both"))
	}
	if c.Listen == "" {
		if tls || c.TLSClientCA != "" || c.AuthTokens != "" {
			errs = append(errs, fmt.Errorf("--tls-cert, --tls-client-ca and --auth-tokens secure the TCP listener, and there is none: give --listen (the Unix socket uses neither)"))
		}
		return errs
	}
	if tls || c.InsecureTCP || loopbackAddr(c.Listen) {
		return errs
	}
	if c.AuthTokens != "" {
		errs = append(errs, fmt.Errorf("--listen %s is not a loopback address and --auth-tokens would send its tokens over it in the clear: pass --tls-cert and --tls-key, or --insecure-tcp behind something that encrypts (a service mesh)", c.Listen))
	} else {
		errs = append(errs, fmt.Errorf("--listen %s is not a loopback address: pass --tls-cert and --tls-key to serve it over TLS, or --insecure-tcp to serve it in plaintext to whoever reaches the port", c.Listen))
	}
	return errs
}

// loopbackAddr: host of addr is localhost, or in 127.0.0.0/8 or ::1. An
// empty host (":50051") is every interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// security loads the files of the security flags; nil when none is set.
func (c *Config) security(log *slog.Logger) (*Security, error) {
	if c.TLSCert == "" && c.TLSKey == "" && c.TLSClientCA == "" && c.AuthTokens == "" {
		return nil, nil
	}
	return NewSecurity(SecurityConfig{CertFile: c.TLSCert, KeyFile: c.TLSKey, ClientCAFile: c.TLSClientCA,
		TokensFile: c.AuthTokens, Logger: log})
}
