// Command rscoord-image writes the coordinator's OCI image archive from a
// static rscoord binary, without a container engine. `go tool task image`
// builds the binary and runs it; see internal/image for what the image
// holds.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/rscoord/rscoord/internal/image"
	"github.com/rscoord/rscoord/internal/version"
)

// CLI is the command line of rscoord-image.
type CLI struct {
	Binary   string `required:"" type:"existingfile" help:"Static linux rscoord binary (CGO_ENABLED=0)."`
	CACerts  string `name:"ca-certs" default:"/etc/ssl/certs/ca-certificates.crt" help:"PEM CA bundle to include (Debian: the ca-certificates package)."`
	Arch     string `default:"${arch}" env:"GOARCH" help:"GOARCH the binary was built for."`
	Version  string `default:"${version}" help:"Version label of the image (the rscoord binary's, as --version prints it)."`
	Revision string `default:"${revision}" help:"Revision label of the image: the commit the binary was built from."`
	Ref      string `default:"rscoord:latest" help:"Reference name recorded in the archive's index."`
	Out      string `required:"" help:"Archive to write (an OCI image layout in a tar)."`
}

func main() {
	var cli CLI
	// The defaults are this program's own build: the same checkout as the
	// binary when the image task runs it.
	build := version.Get()
	kong.Parse(&cli, kong.Vars{"arch": runtime.GOARCH, "version": build.Version, "revision": build.Revision}, kong.Description("Write the rscoord OCI image archive."))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cli); err != nil {
		fmt.Fprintln(os.Stderr, "rscoord-image:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, cli CLI) error {
	// SOURCE_DATE_EPOCH (reproducible-builds.org) fixes every timestamp;
	// without it the epoch is used, so equal inputs give equal digests.
	created := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", s)
		}
		created = time.Unix(sec, 0).UTC()
	}
	img, err := image.Build(image.Config{Binary: cli.Binary, CACerts: cli.CACerts, Arch: cli.Arch,
		Version: version.Normalize(cli.Version), Revision: cli.Revision, Created: created})
	if err != nil {
		return err
	}
	if err := image.WriteOCIArchive(ctx, img, cli.Ref, cli.Out); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s)\n", cli.Out, cli.Ref, digest)
	return nil
}
