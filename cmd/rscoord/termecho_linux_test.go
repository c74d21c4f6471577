package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// echoOff reports whether the terminal whose master side is ptmx no longer
// echoes what is typed: hash-password prints its prompt before it turns
// echo off, so a test that types at once may see its password echoed.
func echoOff(ptmx *os.File) bool {
	t, err := unix.IoctlGetTermios(int(ptmx.Fd()), unix.TCGETS)
	return err == nil && t.Lflag&unix.ECHO == 0
}
