package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/bcrypt"
)

// Files this package keeps in the data directory. Pebble ignores files
// whose names it does not know.
const (
	// SecretFile holds the generated token secret, hex-encoded.
	SecretFile = "rscoord-token-secret"
	// AdminHashFile holds the bcrypt hash of the generated admin password.
	AdminHashFile = "rscoord-admin-password-hash"
	// AdminPasswordFile holds a generated admin password in plain text
	// (mode 0600) for the operator to read once; the server never reads
	// it, and the operator may delete it.
	AdminPasswordFile = "rscoord-admin-password"
)

// MinAdminPasswordLength is the shortest RSCOORD_ADMIN_PASSWORD accepted:
// the bootstrap admin may do anything, and bcrypt slows guessing but does
// not make a short password long.
const MinAdminPasswordLength = 12

// AdminUsername is the name of the bootstrap user.
const AdminUsername = "admin"

// LoadOrCreateSecret returns the token secret: fromEnv when not empty
// (RSCOORD_TOKEN_SECRET; at least [MinSecretBytes] bytes), else the secret
// kept in dir, generated (32 random bytes, file mode 0600) on first use.
func LoadOrCreateSecret(dir, fromEnv string) ([]byte, error) {
	if fromEnv != "" {
		if len(fromEnv) < MinSecretBytes {
			return nil, fmt.Errorf("RSCOORD_TOKEN_SECRET must be at least %d bytes", MinSecretBytes)
		}
		return []byte(fromEnv), nil
	}
	path := filepath.Join(dir, SecretFile)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		secret, err := hex.DecodeString(string(bytes.TrimSpace(raw)))
		if err != nil || len(secret) < MinSecretBytes {
			return nil, fmt.Errorf("token secret file %s is damaged; delete it to generate a new one (every token becomes invalid)", path)
		}
		return secret, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate token secret: %w", err)
	}
	if err := writeFileAtomic(path, []byte(hex.EncodeToString(secret)+"\n")); err != nil {
		return nil, fmt.Errorf("store token secret: %w", err)
	}
	return secret, nil
}

// BootstrapAdmin returns the bootstrap user "admin" (role ADMIN). Its
// password is fromEnv when not empty (RSCOORD_ADMIN_PASSWORD, at least
// [MinAdminPasswordLength] characters; nothing is stored). Otherwise the
// bcrypt hash kept in dir is used. On first start a random password is
// generated: it is written to [AdminPasswordFile] in dir (mode 0600) and
// its hash to [AdminHashFile], and generated names that file, for the
// caller to log. The password itself is never printed or logged: log
// lines end up in log stores. cost is the bcrypt cost (0: default).
//
// fromEnv is hashed afresh at every start, with a new salt, so its tokens
// are issued for a keyed hash of the password under secret (the token
// secret) instead of the bcrypt hash: they outlive a restart, and are good
// on every replica that shares the secret, until the password or the
// secret changes. The keyed hash never leaves the server (a token carries
// a hash of it), so a token does not let anyone guess the password
// offline.
func BootstrapAdmin(dir, fromEnv string, secret []byte, cost int) (admin User, generated string, err error) {
	if fromEnv != "" {
		if n := len([]rune(fromEnv)); n < MinAdminPasswordLength {
			return User{}, "", fmt.Errorf("RSCOORD_ADMIN_PASSWORD has %d characters; it must have at least %d", n, MinAdminPasswordLength)
		}
		hash, err := HashPassword(fromEnv, cost)
		if err != nil {
			return User{}, "", fmt.Errorf("RSCOORD_ADMIN_PASSWORD: %w", err)
		}
		credential := sign(secret, "rscoord-bootstrap-admin\x00"+fromEnv)
		return User{Username: AdminUsername, PasswordHash: hash, Credential: credential, Roles: Admin}, "", nil
	}
	path := filepath.Join(dir, AdminHashFile)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		hash := bytes.TrimSpace(raw)
		if _, err := bcrypt.Cost(hash); err != nil {
			return User{}, "", fmt.Errorf("admin password file %s does not hold a bcrypt hash; delete it to generate a new password", path)
		}
		return User{Username: AdminUsername, PasswordHash: hash, Roles: Admin}, "", nil
	case !errors.Is(err, fs.ErrNotExist):
		return User{}, "", fmt.Errorf("read admin password hash: %w", err)
	}
	random := make([]byte, 18)
	if _, err := rand.Read(random); err != nil {
		return User{}, "", fmt.Errorf("generate admin password: %w", err)
	}
	password := base64.RawURLEncoding.EncodeToString(random)
	hash, err := HashPassword(password, cost)
	if err != nil {
		return User{}, "", err
	}
	// The password file first: a crash between the two writes leaves no
	// hash, so the next start generates a new password and overwrites it.
	passwordPath := filepath.Join(dir, AdminPasswordFile)
	if err := writeFileAtomic(passwordPath, []byte(password+"\n")); err != nil {
		return User{}, "", fmt.Errorf("store the generated admin password: %w", err)
	}
	if err := writeFileAtomic(path, append(hash, '\n')); err != nil {
		return User{}, "", fmt.Errorf("store admin password hash: %w", err)
	}
	return User{Username: AdminUsername, PasswordHash: hash, Roles: Admin}, passwordPath, nil
}

// writeFileAtomic writes data to path with mode 0600 through a synced
// temporary file and a rename, so that a crash leaves either no file or a
// whole one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
