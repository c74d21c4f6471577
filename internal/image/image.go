// Package image builds the coordinator's container image without a
// container engine: one layer with the static rscoord binary, the CA
// certificates and an empty data directory owned by a non-root numeric
// user, written as an OCI image layout in a tar file (docker load, podman
// load and skopeo copy oci-archive: read it).
//
// The constants here are the image's contract; the Dockerfile and
// compose.yaml repeat them and a test keeps them in step.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's contract.
const (
	// BinaryPath is where the rscoord binary lives, and the entrypoint.
	BinaryPath = "/rscoord"
	// CACertsPath is the CA bundle Go's crypto/x509 looks for first on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// DataDir is the coordinator's --data-dir, owned by UID:GID.
	DataDir = "/data"
	// UID and GID are the numeric non-root user the process runs as
	// (65532, the "nonroot" user of distroless images).
	UID = 65532
	GID = 65532
	// Port is the port the default command listens on.
	Port = 8080
	// DefaultCACerts is the Debian ca-certificates bundle of the build machine.
	DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the org.opencontainers.image.source label: where the
	// code lives.
	Source = "https://github.com/rscoord/rscoord"
	// Licenses is the org.opencontainers.image.licenses label (LICENSE).
	Licenses = "Apache-2.0"
)

// Labels are the image's OCI annotations for a version and revision.
func Labels(version, revision string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "rscoord",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": Licenses,
	}
}

// User is the image config's User: numeric, so that runtimes enforcing
// runAsNonRoot can check it without an /etc/passwd lookup.
func User() string { return fmt.Sprintf("%d:%d", UID, GID) }

// Entrypoint is the image's entrypoint.
func Entrypoint() []string { return []string{BinaryPath} }

// Cmd is the default command: serve on all interfaces with the data in
// DataDir.
func Cmd() []string {
	return []string{"serve", "--listen", fmt.Sprintf("0.0.0.0:%d", Port), "--data-dir", DataDir}
}

// Config says what to put in the image.
type Config struct {
	// Binary is the static (CGO_ENABLED=0) linux rscoord binary.
	Binary string
	// CACerts is the PEM bundle copied to CACertsPath.
	CACerts string
	// Arch is the GOARCH the binary was built for.
	Arch string
	// Version is the org.opencontainers.image.version label.
	Version string
	// Revision is the org.opencontainers.image.revision label: the commit.
	Revision string
	// Created is the image's creation time and every file's mtime;
	// a fixed time makes the build reproducible.
	Created time.Time
}

// Build assembles the image.
func Build(cfg Config) (v1.Image, error) {
	if cfg.Binary == "" || cfg.CACerts == "" || cfg.Arch == "" || cfg.Version == "" || cfg.Revision == "" {
		return nil, errors.New("image: Binary, CACerts, Arch, Version and Revision are required")
	}
	bin, err := os.ReadFile(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: binary: %w", err)
	}
	certs, err := os.ReadFile(cfg.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA certificates (Debian: apt-get install ca-certificates): %w", err)
	}
	rootfs, err := rootFS(bin, certs, cfg.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{CreatedBy: "rscoord internal/image", Created: v1.Time{Time: cfg.Created}}})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", cfg.Arch
	cf.Created = v1.Time{Time: cfg.Created}
	cf.Config.User = User()
	cf.Config.Entrypoint = Entrypoint()
	cf.Config.Cmd = Cmd()
	cf.Config.WorkingDir = DataDir
	cf.Config.Env = []string{"SSL_CERT_FILE=" + CACertsPath}
	cf.Config.ExposedPorts = map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}}
	cf.Config.Volumes = map[string]struct{}{DataDir: {}}
	cf.Config.Labels = Labels(cfg.Version, cfg.Revision)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	return img, nil
}

// rootFS is the layer: the binary, the CA bundle, a minimal passwd and
// group naming the user, /tmp, and the data directory owned by the user.
func rootFS(bin, certs []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid, gid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:rscoord:%s:/sbin/nologin\n", UID, GID, DataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	steps := []error{
		dir("etc", 0o755, 0, 0),
		dir("etc/ssl", 0o755, 0, 0),
		dir("etc/ssl/certs", 0o755, 0, 0),
		file(CACertsPath[1:], 0o644, certs),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("tmp", 0o1777, 0, 0),
		dir(DataDir[1:], 0o700, UID, GID),
		file(BinaryPath[1:], 0o755, bin),
		tw.Close(),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, fmt.Errorf("image: root filesystem: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteOCIArchive writes img as an OCI image layout in a tar file at path,
// tagged ref (the org.opencontainers.image.ref.name annotation).
func WriteOCIArchive(ctx context.Context, img v1.Image, ref, path string) error {
	dir, err := os.MkdirTemp("", "rscoord-image-")
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

// tarDir writes the files under dir, relative to it, into a tar at out.
func tarDir(dir, out string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("image: archive: %w", err)
	}
	return tw.Close()
}
