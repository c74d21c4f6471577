package repocheck

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// root is the repository's top directory: this package is two levels down.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", dir, err)
	}
	return dir
}

// trackedFiles lists the files git tracks, relative to the root. Outside a
// git checkout the test fails: every check here is about what is committed.
func trackedFiles(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (these checks need a git checkout and git on PATH)", dir, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	if len(files) < 50 {
		t.Fatalf("git ls-files listed only %d files: the listing is broken", len(files))
	}
	return files
}

// TestNoLargeTrackedFiles keeps build outputs and data dumps out of the
// repository: no tracked file may exceed 1 MiB.
func TestNoLargeTrackedFiles(t *testing.T) {
	dir := root(t)
	const limit = 1 << 20
	for _, f := range trackedFiles(t, dir) {
		fi, err := os.Lstat(filepath.Join(dir, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > limit {
			t.Errorf("%s is %d bytes, over the 1 MiB limit for tracked files (build outputs belong in ./bin, which is ignored)", f, fi.Size())
		}
	}
}

// forbidden are references product text must not make: files of a
// specification that is not in the repository, and tracker issue numbers.
// The patterns are assembled so that this file does not match them itself.
var forbidden = []*regexp.Regexp{
	regexp.MustCompile(`\b(PROTOCOL|ARCHITECTURE|STYLE)` + `\.md\b`),
	regexp.MustCompile(`\.\./` + `shared\b`),
	regexp.MustCompile(`\b[Ii]` + `ssue #?[0-9]+`),
}

// TestNoReferencesOutsideTheRepo fails when tracked text cites a file
// outside the repository or a tracker issue. docs/protocol-notes.md may
// name the shared specification: it records deviations from it.
func TestNoReferencesOutsideTheRepo(t *testing.T) {
	dir := root(t)
	for _, f := range trackedFiles(t, dir) {
		if f == "docs/protocol-notes.md" || f == "go.sum" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(raw, 0) >= 0 {
			continue // binary
		}
		for n, line := range strings.Split(string(raw), "\n") {
			for _, re := range forbidden {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d cites %q; cite docs/protocol.md or docs/architecture.md sections instead", f, n+1, m)
				}
			}
		}
	}
}

// TestRelativeLinksResolve checks every link and image of README.md and
// docs/*.md: a relative target must exist in the repository, and a
// #fragment must name a heading of the target Markdown file.
func TestRelativeLinksResolve(t *testing.T) {
	dir := root(t)
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := append([]string{filepath.Join(dir, "README.md")}, docs...)
	checked := 0
	for _, page := range pages {
		rel, _ := filepath.Rel(dir, page)
		for _, link := range links(t, page) {
			if err := checkLink(dir, page, link); err != nil {
				t.Errorf("%s: link %q: %v", rel, link, err)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d links checked: the walk is broken", checked)
	}
}

// links returns the destinations of every link and image in a Markdown file.
func links(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var out []string
	err = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			out = append(out, string(n.Destination))
		case *ast.Image:
			out = append(out, string(n.Destination))
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLink resolves one link destination found in page.
func checkLink(dir, page, dest string) error {
	u, err := url.Parse(dest)
	if err != nil {
		return err
	}
	if u.Scheme != "" || u.Host != "" {
		if u.Scheme == "file" {
			return fmt.Errorf("file links point outside the repository")
		}
		return nil // external; not checked offline
	}
	target := page
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return fmt.Errorf("absolute paths do not resolve on every host; use a relative one")
		}
		target = filepath.Join(filepath.Dir(page), filepath.FromSlash(u.Path))
		inside, err := filepath.Rel(dir, target)
		if err != nil || strings.HasPrefix(inside, "..") {
			return fmt.Errorf("points outside the repository")
		}
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("no such file or directory: %s", inside)
		}
	}
	if u.Fragment == "" || !strings.HasSuffix(target, ".md") {
		return nil
	}
	anchors, err := headingAnchors(target)
	if err != nil {
		return err
	}
	if !anchors[u.Fragment] {
		return fmt.Errorf("no heading with anchor #%s in %s", u.Fragment, filepath.Base(target))
	}
	return nil
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, punctuation dropped, spaces as dashes, and
// -1, -2, … on repeats.
func headingAnchors(path string) (map[string]bool, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := goldmark.New(goldmark.WithParserOptions(parser.WithAutoHeadingID()))
	doc := md.Parser().Parse(text.NewReader(src))
	anchors := map[string]bool{}
	seen := map[string]int{}
	err = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		slug := githubSlug(plainText(h, src))
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
		return ast.WalkSkipChildren, nil
	})
	return anchors, err
}

// plainText is the text of a heading without Markdown markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// githubSlug mirrors GitHub's heading anchors: lower case, letters,
// digits, spaces, '-' and '_' kept, spaces turned into '-'.
func githubSlug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r > 127 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		}
	}
	return b.String()
}
