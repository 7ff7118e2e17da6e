// Package stdcopy splits the multiplexed stdout/stderr stream the Engine API sends for
// containers without a TTY (logs, attach, exec). Each frame is an 8-byte header — the stream
// type, three zero bytes, the payload length as a big-endian uint32 — followed by the payload.
package stdcopy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// StdType is the stream a frame belongs to.
type StdType byte

const (
	// Stdin is written by no daemon output; readers treat it as stdout.
	Stdin StdType = 0
	// Stdout is the container's standard output.
	Stdout StdType = 1
	// Stderr is the container's standard error.
	Stderr StdType = 2
	// Systemerr carries an error the daemon reports in the middle of the stream.
	Systemerr StdType = 3

	headerLen = 8
	// chunk bounds how much of one frame is held in memory at a time.
	chunk = 32 * 1024
)

// StdCopy copies frames from src to dstout (stdin and stdout frames) and dsterr (stderr frames)
// until src ends. It returns the number of payload bytes written. A clean end of src is not an
// error; a frame cut short by it ends the copy quietly. A Systemerr frame stops the copy with
// "error from daemon in stream: <message>", an unknown stream type with "unrecognized stream: N".
func StdCopy(dstout, dsterr io.Writer, src io.Reader) (written int64, err error) {
	var header [headerLen]byte
	buf := make([]byte, chunk)
	for {
		if _, err := io.ReadFull(src, header[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return written, nil
			}
			return written, err
		}
		size := int64(binary.BigEndian.Uint32(header[4:]))
		var dst io.Writer
		switch StdType(header[0]) {
		case Stdin, Stdout:
			dst = dstout
		case Stderr:
			dst = dsterr
		case Systemerr:
			msg, err := io.ReadAll(io.LimitReader(src, size))
			if err != nil {
				return written, err
			}
			return written, fmt.Errorf("error from daemon in stream: %s", msg)
		default:
			return written, fmt.Errorf("unrecognized stream: %d", header[0])
		}
		n, err := copyFrame(dst, src, size, buf)
		written += n
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return written, nil
			}
			return written, err
		}
	}
}

// copyFrame moves exactly size payload bytes from src to dst in bounded pieces.
func copyFrame(dst io.Writer, src io.Reader, size int64, buf []byte) (int64, error) {
	var written int64
	for written < size {
		want := size - written
		if want > int64(len(buf)) {
			want = int64(len(buf))
		}
		n, err := io.ReadFull(src, buf[:want])
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			written += int64(w)
			if werr != nil {
				return written, werr
			}
			if w != n {
				return written, io.ErrShortWrite
			}
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// NewStdWriter returns a writer that frames everything written to it as stream t, for tests and
// for tools that produce the multiplexed format.
func NewStdWriter(w io.Writer, t StdType) io.Writer {
	return &stdWriter{w: w, t: t}
}

type stdWriter struct {
	w io.Writer
	t StdType
}

func (s *stdWriter) Write(p []byte) (int, error) {
	frame := make([]byte, headerLen+len(p))
	frame[0] = byte(s.t)
	binary.BigEndian.PutUint32(frame[4:headerLen], uint32(len(p)))
	copy(frame[headerLen:], p)
	n, err := s.w.Write(frame)
	n -= headerLen
	if n < 0 {
		n = 0
	}
	return n, err
}
