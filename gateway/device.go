package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Device is an Ed25519 device identity used to sign connect.
type Device struct {
	// ID is the lowercase hex SHA-256 of the raw public key.
	ID         string
	PublicKey  ed25519.PublicKey
	PrivateKey ed25519.PrivateKey
}

// DeviceFileName is the file LoadOrCreateDevice keeps under its home
// directory.
const DeviceFileName = "gateway-device.json"

type deviceFile struct {
	Version    int    `json:"version"`
	DeviceID   string `json:"deviceId"`
	PublicKey  string `json:"publicKey"`  // base64url raw 32 bytes
	PrivateKey string `json:"privateKey"` // base64url raw 32-byte seed
}

// NewDevice returns a Device for the given Ed25519 private key.
func NewDevice(priv ed25519.PrivateKey) *Device {
	pub := priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	return &Device{ID: hex.EncodeToString(sum[:]), PublicKey: pub, PrivateKey: priv}
}

// LoadOrCreateDevice reads the device identity from home/DeviceFileName,
// creating home (0700) and a new key file (0600) when it is missing or
// unreadable as an identity. home is normally CLAWCONNECT_HOME
// (default ~/.clawconnect), resolved by the caller.
func LoadOrCreateDevice(home string) (*Device, error) {
	if home == "" {
		return nil, errors.New("load device: empty home directory")
	}
	path := filepath.Join(home, DeviceFileName)
	data, err := os.ReadFile(path)
	if err == nil {
		if d, perr := parseDeviceFile(data); perr == nil {
			return d, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load device: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("load device: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("load device: generate key: %w", err)
	}
	d := NewDevice(priv)
	out, _ := json.MarshalIndent(deviceFile{
		Version: 1, DeviceID: d.ID,
		PublicKey:  base64.RawURLEncoding.EncodeToString(d.PublicKey),
		PrivateKey: base64.RawURLEncoding.EncodeToString(priv.Seed()),
	}, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("load device: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return nil, fmt.Errorf("load device: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("load device: %w", err)
	}
	return d, nil
}

func parseDeviceFile(data []byte) (*Device, error) {
	var f deviceFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	seed, err := base64.RawURLEncoding.DecodeString(f.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("bad private key")
	}
	return NewDevice(ed25519.NewKeyFromSeed(seed)), nil
}

// devicePayloadV3 is the exact string the gateway verifies.
func devicePayloadV3(deviceID, clientID, mode, role string, scopes []string, signedAt int64, token, nonce, platform, family string) string {
	return strings.Join([]string{"v3", deviceID, clientID, mode, role, strings.Join(scopes, ","),
		strconv.FormatInt(signedAt, 10), token, nonce,
		strings.ToLower(strings.TrimSpace(platform)), strings.ToLower(strings.TrimSpace(family))}, "|")
}

// deviceParams is the connect "device" object.
type deviceParams struct {
	ID        string `json:"id"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

func (d *Device) sign(payload string, signedAt int64, nonce string) *deviceParams {
	return &deviceParams{
		ID: d.ID, PublicKey: base64.RawURLEncoding.EncodeToString(d.PublicKey),
		Signature: base64.RawURLEncoding.EncodeToString(ed25519.Sign(d.PrivateKey, []byte(payload))),
		SignedAt:  signedAt, Nonce: nonce,
	}
}
