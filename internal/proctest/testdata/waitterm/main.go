// Command waitterm says it is ready, then exits 0 on SIGTERM: a process
// for proctest's own tests.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("ready")
	<-sig
	fmt.Println("stopping")
}
