package depwait

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Reason says why an attempt to reach a dependency failed in a phrase safe to
// show anyone: readiness reports are read by whoever can reach the ops port,
// and the drivers' errors carry the server's address and the database user
// (pgx's "failed to connect to `user=… database=…`: host:port …"). The full
// error belongs in the logs.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	if r := Classify(err); r != "" {
		return r
	}
	return "not answering"
}

// Classify is Reason for errors of a known class, and "" for the others (a
// bug, a refusal of a driver's own): for reports about components that fail
// for reasons other than a dependency, where Reason's "not answering" would
// mislead.
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var (
		dnsErr   *net.DNSError
		netErr   net.Error
		sqlErr   interface{ SQLState() string }
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &sqlErr):
		return sqlStateReason(sqlErr.SQLState())
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed by the server"
	case errors.As(err, &dnsErr):
		return "host name does not resolve"
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return "TLS certificate not accepted"
	case errors.As(err, &record):
		return "TLS handshake failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "no answer in time"
	}
	return ""
}

// sqlStateReason names the Postgres refusals a starting role meets; the
// server's own messages may name the user, so only the code is passed on.
func sqlStateReason(code string) string {
	switch code {
	case "57P03":
		return "the server is starting up or shutting down"
	case "28P01", "28000":
		return "authentication refused (SQLSTATE " + code + ")"
	case "3D000":
		return "the database does not exist"
	case "53300":
		return "too many connections"
	}
	return "the server refused (SQLSTATE " + code + ")"
}
