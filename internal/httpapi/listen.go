package httpapi

import (
	"errors"
	"os"
)

// ListenError is a failure to bind a server's address. Setting, when the
// caller knows it, names the flag that chose the address, so the message
// says what to change: "ingest server: listen on :8080 (--ingest-addr):
// address already in use".
type ListenError struct {
	Server  string // "ingest", "read store", ...; "" for none
	Addr    string
	Setting string // "--ingest-addr", ...; "" when unknown
	Err     error
}

func (e *ListenError) Error() string {
	cause := e.Err
	// The cause is "listen tcp ADDR: bind: ERRNO" (a net.OpError around an
	// os.SyscallError); the address is said once already.
	var se *os.SyscallError
	if errors.As(cause, &se) {
		cause = se.Err
	}
	where := e.Addr
	if e.Setting != "" {
		where += " (" + e.Setting + ")"
	}
	msg := "listen on " + where + ": " + cause.Error()
	if e.Server != "" {
		msg = e.Server + " server: " + msg
	}
	return msg
}

func (e *ListenError) Unwrap() error { return e.Err }

// NameSetting returns err with the setting that chose the address named,
// if err is a ListenError; any other error as it is.
func NameSetting(err error, setting string) error {
	var le *ListenError
	if !errors.As(err, &le) {
		return err
	}
	named := *le
	named.Setting = setting
	return &named
}
