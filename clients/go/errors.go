package berth

import (
	"errors"
	"fmt"
)

// Kind classifies the errors the daemon reports.
type Kind int

const (
	KindUnknown Kind = iota
	KindBadRequest
	KindUnauthorized
	KindForbidden
	KindNotFound
	KindConflict
	KindServerError
)

// Sentinel kinds for errors.Is: errors.Is(err, berth.ErrNotFound).
var (
	ErrBadRequest   = &kindError{KindBadRequest}
	ErrUnauthorized = &kindError{KindUnauthorized}
	ErrForbidden    = &kindError{KindForbidden}
	ErrNotFound     = &kindError{KindNotFound}
	ErrConflict     = &kindError{KindConflict}
	ErrServerError  = &kindError{KindServerError}
)

type kindError struct{ kind Kind }

func (k *kindError) Error() string {
	return [...]string{"unknown", "bad request", "unauthorized", "forbidden", "not found", "conflict", "server error"}[k.kind]
}

// Error is an error response from the daemon; Message is the daemon's own text.
type Error struct {
	StatusCode int
	Kind       Kind
	Message    string
}

func (e *Error) Error() string { return "Error response from daemon: " + e.Message }

// Is matches the sentinel of the error's kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(*kindError)
	return ok && k.kind == e.Kind
}

// NotFound, Conflict, InvalidParameter, Unauthorized, Forbidden and System let errdefs-style
// checks (interfaces with these methods) classify the error.
func (e *Error) NotFound() bool         { return e.Kind == KindNotFound }
func (e *Error) Conflict() bool         { return e.Kind == KindConflict }
func (e *Error) InvalidParameter() bool { return e.Kind == KindBadRequest }
func (e *Error) Unauthorized() bool     { return e.Kind == KindUnauthorized }
func (e *Error) Forbidden() bool        { return e.Kind == KindForbidden }
func (e *Error) System() bool           { return e.Kind == KindServerError }

func newError(status int, message string) *Error {
	k := KindUnknown
	switch {
	case status == 400:
		k = KindBadRequest
	case status == 401:
		k = KindUnauthorized
	case status == 403:
		k = KindForbidden
	case status == 404:
		k = KindNotFound
	case status == 409:
		k = KindConflict
	case status >= 500:
		k = KindServerError
	}
	if message == "" {
		message = fmt.Sprintf("status %d", status)
	}
	return &Error{StatusCode: status, Kind: k, Message: message}
}

// IsErrNotFound reports whether err is a 404 from the daemon.
func IsErrNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsErrConflict reports whether err is a 409 from the daemon.
func IsErrConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsErrBadRequest reports whether err is a 400 from the daemon.
func IsErrBadRequest(err error) bool { return errors.Is(err, ErrBadRequest) }

// IsErrServerError reports whether err is a 5xx from the daemon.
func IsErrServerError(err error) bool { return errors.Is(err, ErrServerError) }

// IsErrUnauthorized reports whether err is a 401 from the daemon.
func IsErrUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }
