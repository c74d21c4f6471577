package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// stderrWriter is where prompts go, so that they never mix with output a
// script reads from stdout.
type stderrWriter struct{ io.Writer }

// maxSecretBytes bounds a password read from stdin.
const maxSecretBytes = 4096

// readSecret reads one secret. On a terminal it prompts on stderr and reads
// without echo; otherwise it reads the first line of in (a pipe or file).
func readSecret(in io.Reader, stderr stderrWriter, prompt string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, prompt)
		raw, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password from the terminal: %w", err)
		}
		if len(raw) == 0 {
			return "", errors.New("empty password")
		}
		return string(raw), nil
	}
	line, err := bufio.NewReader(io.LimitReader(in, maxSecretBytes)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	secret := strings.TrimRight(line, "\r\n")
	if secret == "" {
		return "", errors.New("no password on stdin (e.g. printf %s \"$PW\" | rscoord …)")
	}
	return secret, nil
}

// isTerminal reports whether in is a terminal.
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
