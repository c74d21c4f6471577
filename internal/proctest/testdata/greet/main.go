// Command greet prints its first argument and exits 0: a process for
// proctest's own tests.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println("hello " + os.Args[1]) }
