package image_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/rscoord/rscoord/internal/image"
)

// TestImageTask runs `go tool task image`, opens bin/rscoord-image.tar as
// an OCI layout, checks its config, unpacks its root filesystem and runs
// the entrypoint from it under chroot as the image's user with --version.
func TestImageTask(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the image's entrypoint under chroot, which needs root (CI runs as root)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "task", "image")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool task image: %v\n%s", err, out)
	}
	archive := filepath.Join(root, "bin", "rscoord-image.tar")
	dir := t.TempDir()
	untar(t, archive, filepath.Join(dir, "layout"))
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index: %v %+v", err, im)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != image.User() || strings.HasPrefix(c.User, "0") || !regexp.MustCompile(`^[0-9]+:[0-9]+$`).MatchString(c.User) {
		t.Errorf("user %q, want the numeric non-root %s", c.User, image.User())
	}
	if !slices.Equal(c.Entrypoint, []string{"/rscoord"}) || len(c.Cmd) == 0 || c.Cmd[0] != "serve" || !slices.Contains(c.Cmd, image.DataDir) {
		t.Errorf("entrypoint %v cmd %v", c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" {
		t.Errorf("os %q", cf.OS)
	}
	rootfs := filepath.Join(dir, "rootfs")
	rc := mutate.Extract(img)
	defer rc.Close()
	untarReader(t, rc, rootfs)
	for _, p := range []string{image.BinaryPath, image.CACertsPath} {
		if fi, err := os.Stat(filepath.Join(rootfs, p)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty in the image: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(rootfs, image.DataDir)); err != nil || !fi.IsDir() {
		t.Errorf("%s: %v", image.DataDir, err)
	} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != image.UID || st.Gid != image.GID {
		t.Errorf("%s owned by %d:%d, want %s", image.DataDir, st.Uid, st.Gid, image.User())
	}
	run := exec.CommandContext(ctx, image.BinaryPath, "--version")
	run.Dir = "/"
	run.Env = append([]string{}, c.Env...)
	run.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: image.UID, Gid: image.GID}}
	out, err := run.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "rscoord ") {
		t.Fatalf("entrypoint --version in the image's root fs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	// The labels name the build the binary reports.
	v, rev := c.Labels["org.opencontainers.image.version"], c.Labels["org.opencontainers.image.revision"]
	if v == "" || strings.Contains(v, "devel") || len(rev) < 12 {
		t.Fatalf("labels %v: want a version and the commit", c.Labels)
	}
	if want := image.Labels(v, rev); !maps.Equal(c.Labels, want) {
		t.Errorf("labels %v, want %v", c.Labels, want)
	}
	if want := "rscoord " + v + " (revision " + rev[:12]; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version says %q, the labels %q", out, want)
	}
}

// TestDockerfileMatchesTask keeps the Dockerfile's build flags, paths,
// user, entrypoint and command equal to the task's and the image's.
func TestDockerfileMatchesTask(t *testing.T) {
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	taskfile, err := os.ReadFile("../../Taskfile.yml")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`go build (-trimpath -ldflags "[^"]*") -o \S+ (\./cmd/rscoord)\n`)
	// The Dockerfile names the version and revision build arguments as
	// ${X}, the Taskfile its variables as {{.X}}.
	d := build.FindStringSubmatch(regexp.MustCompile(`\$\{([A-Z]+)\}`).ReplaceAllString(string(docker), "{{.$1}}"))
	tk := build.FindStringSubmatch(string(taskfile))
	if d == nil || tk == nil {
		t.Fatalf("no go build line: Dockerfile %v, Taskfile %v", d, tk)
	}
	if d[1] != tk[1] || d[2] != tk[2] {
		t.Errorf("Dockerfile builds with %q %q, the task with %q %q", d[1], d[2], tk[1], tk[2])
	}
	if !strings.Contains(tk[1], "internal/version.version={{.VERSION}}") || !strings.Contains(tk[1], "internal/version.revision={{.REVISION}}") {
		t.Errorf("the image build %q does not stamp the version and revision", tk[1])
	}
	if !strings.Contains(string(docker), "CGO_ENABLED=0") || !strings.Contains(string(taskfile), "CGO_ENABLED: '0'") {
		t.Error("both builds must be static (CGO_ENABLED=0)")
	}
	// The image is the last stage (docker build's default target); the
	// stages before it build the binaries and the sample pods.
	final := string(docker[strings.LastIndex(string(docker), "\nFROM "):])
	jsonLine := func(directive string) []string {
		m := regexp.MustCompile(`(?m)^` + directive + ` (\[.*\])$`).FindStringSubmatch(final)
		if m == nil {
			t.Fatalf("Dockerfile has no %s [...]", directive)
		}
		var v []string
		if err := json.Unmarshal([]byte(m[1]), &v); err != nil {
			t.Fatalf("%s: %v", directive, err)
		}
		return v
	}
	if got := jsonLine("ENTRYPOINT"); !slices.Equal(got, image.Entrypoint()) {
		t.Errorf("Dockerfile ENTRYPOINT %v, image %v", got, image.Entrypoint())
	}
	if got := jsonLine("CMD"); !slices.Equal(got, image.Cmd()) {
		t.Errorf("Dockerfile CMD %v, image %v", got, image.Cmd())
	}
	release, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nARG VERSION=" + strings.TrimSpace(string(release)) + "\n"; !strings.Contains(string(docker), want) {
		t.Errorf("Dockerfile lacks %q: its default version must be the VERSION file's", want)
	}
	for k, v := range image.Labels("${VERSION}", "${REVISION}") {
		if want := k + `="` + v + `"`; !strings.Contains(final, want) {
			t.Errorf("Dockerfile's image lacks the label %s", want)
		}
	}
	for _, want := range []string{"USER " + image.User() + "\n", "COPY --from=build /out/rscoord " + image.BinaryPath + "\n",
		"--chown=" + image.User() + " /out/data " + image.DataDir + "\n", image.CACertsPath + " " + image.CACertsPath + "\n"} {
		if !strings.Contains(final, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	untarReader(t, f, dir)
}

// untarReader unpacks regular files and directories (with their owners and
// modes) under dir; entries that would leave dir fail the test.
func untarReader(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) && p != filepath.Clean(dir) {
			t.Fatalf("entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		if err := os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// TestDockerignoreKeepsOutputsAndSecretsOut checks that docker build's
// context leaves out the history, build outputs, local data and the demo's
// and cluster task's secrets (.demo holds a token secret).
func TestDockerignoreKeepsOutputsAndSecretsOut(t *testing.T) {
	raw, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			entries[strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/")] = true
		}
	}
	for _, want := range []string{".git", "bin", "data", ".demo", ".cluster", ".redis", "**/*.test", "**/*.out"} {
		if !entries[want] {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	// The build needs the sources and the VERSION file.
	for _, needed := range []string{"VERSION", "go.mod", "client", "cmd", "*.go", "**/*.go"} {
		if entries[needed] {
			t.Errorf(".dockerignore leaves out %s, which the build needs", needed)
		}
	}
}
