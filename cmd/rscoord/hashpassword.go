package main

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/gateway/auth"
)

// HashPasswordCmd is "rscoord hash-password": it reads one password (the
// first line of stdin) and prints its bcrypt hash for the users file. The
// password never appears on the command line.
type HashPasswordCmd struct {
	Cost int `default:"10" help:"bcrypt cost (4..31); each step doubles the time of every check."`
}

// Run hashes the password: typed twice without echo on a terminal, else
// the first line of stdin.
func (h *HashPasswordCmd) Run(in io.Reader, out io.Writer, stderr stderrWriter) error {
	if h.Cost < bcrypt.MinCost || h.Cost > bcrypt.MaxCost {
		return fmt.Errorf("hash-password: --cost %d is outside %d..%d", h.Cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	password, err := readSecret(in, stderr, "Password: ")
	if err != nil {
		return fmt.Errorf("hash-password: %w", err)
	}
	if isTerminal(in) {
		again, err := readSecret(in, stderr, "Again: ")
		if err != nil {
			return fmt.Errorf("hash-password: %w", err)
		}
		if again != password {
			return errors.New("hash-password: the two passwords differ")
		}
	}
	hash, err := auth.HashPassword(password, h.Cost)
	if err != nil {
		return fmt.Errorf("hash-password: %w", err)
	}
	return printLine(out, "%s", hash)
}
