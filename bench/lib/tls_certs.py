#!/usr/bin/env python3
"""Certificates for bench/tls.sh, made once and cached.

Makes, under DIR:
    ca-ecdsa.pem, ca-rsa.pem    self-signed CAs (P-256 and RSA-2048)
    ecdsa.pem, rsa.pem          bundles for bench.test: leaf, CA, private key
    store-N/nI.bench.test.pem   N bundles (I = 0..N-1) for nI.bench.test, all signed by the
                                ECDSA CA and sharing one P-256 leaf key, as a directory store
    store-N/.complete           written last; a store without it is made again

Uses the `cryptography` package when importable (10,000 bundles in a few seconds);
otherwise the openssl command line, one `openssl x509 -req` per name (minutes for 10,000).

Usage: tls_certs.py DIR --store-count N
Prints the store directory on stdout.
"""

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile

LEAF = "bench.test"
DAYS = 3650


def write_atomic(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def with_cryptography(d, count, store):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    until = now + datetime.timedelta(days=DAYS)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def pem_key(k):
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def pem_cert(c):
        return c.public_bytes(serialization.Encoding.PEM)

    def ca(key, cn):
        return (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(name(cn))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(until)
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))

    def leaf(ca_cert, ca_key, pub, dns, serial):
        return (x509.CertificateBuilder().subject_name(name(dns)).issuer_name(ca_cert.subject)
                .public_key(pub).serial_number(serial)
                .not_valid_before(now).not_valid_after(until)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))

    ec_ca_key = ec.generate_private_key(ec.SECP256R1())
    ec_ca = ca(ec_ca_key, "Gatehouse bench ECDSA CA")
    rsa_ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_ca = ca(rsa_ca_key, "Gatehouse bench RSA CA")
    write_atomic(os.path.join(d, "ca-ecdsa.pem"), pem_cert(ec_ca))
    write_atomic(os.path.join(d, "ca-rsa.pem"), pem_cert(rsa_ca))

    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_atomic(os.path.join(d, "ecdsa.pem"),
                 pem_cert(leaf(ec_ca, ec_ca_key, ec_key.public_key(), LEAF, 1)) + pem_cert(ec_ca) + pem_key(ec_key))
    write_atomic(os.path.join(d, "rsa.pem"),
                 pem_cert(leaf(rsa_ca, rsa_ca_key, rsa_key.public_key(), LEAF, 1)) + pem_cert(rsa_ca) + pem_key(rsa_key))

    shared = ec.generate_private_key(ec.SECP256R1())
    tail = pem_cert(ec_ca) + pem_key(shared)
    pub = shared.public_key()
    for i in range(count):
        dns = f"n{i}.bench.test"
        with open(os.path.join(store, dns + ".pem"), "wb") as f:
            f.write(pem_cert(leaf(ec_ca, ec_ca_key, pub, dns, 1000 + i)) + tail)


def with_openssl(d, count, store):
    def run(*args, stdin=None):
        subprocess.run(["openssl", *args], check=True, input=stdin,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    w = tempfile.mkdtemp(dir=d, prefix=".work-")
    try:
        for kind, newkey in (("ecdsa", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]),
                             ("rsa", ["-newkey", "rsa:2048"])):
            ca_key, ca_crt = f"{w}/ca-{kind}.key", f"{d}/ca-{kind}.pem"
            run("req", "-x509", *newkey, "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", str(DAYS),
                "-subj", f"/CN=Gatehouse bench {kind.upper()} CA",
                "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
            key = f"{w}/{kind}.key"
            run("req", "-new", *newkey, "-nodes", "-keyout", key, "-out", f"{w}/{kind}.csr", "-subj", f"/CN={LEAF}")
            with open(f"{w}/ext", "w") as f:
                f.write(f"subjectAltName=DNS:{LEAF}\nbasicConstraints=critical,CA:FALSE\n")
            run("x509", "-req", "-in", f"{w}/{kind}.csr", "-CA", ca_crt, "-CAkey", ca_key, "-set_serial", "1",
                "-days", str(DAYS), "-extfile", f"{w}/ext", "-out", f"{w}/{kind}.crt")
            write_atomic(f"{d}/{kind}.pem", read(f"{w}/{kind}.crt") + read(ca_crt) + read(key))
        shared = f"{w}/shared.key"
        run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", shared, "-out", f"{w}/shared.csr", "-subj", "/CN=store")
        tail = read(f"{d}/ca-ecdsa.pem") + read(shared)
        for i in range(count):
            dns = f"n{i}.bench.test"
            with open(f"{w}/ext", "w") as f:
                f.write(f"subjectAltName=DNS:{dns}\nbasicConstraints=critical,CA:FALSE\n")
            run("x509", "-req", "-in", f"{w}/shared.csr", "-CA", f"{d}/ca-ecdsa.pem", "-CAkey", f"{w}/ca-ecdsa.key",
                "-set_serial", str(1000 + i), "-days", str(DAYS), "-extfile", f"{w}/ext",
                "-subj", f"/CN={dns}", "-out", f"{w}/leaf.crt")
            with open(os.path.join(store, dns + ".pem"), "wb") as f:
                f.write(read(f"{w}/leaf.crt") + tail)
            if i and i % 1000 == 0:
                print(f"tls_certs.py: {i}/{count} store bundles", file=sys.stderr)
    finally:
        shutil.rmtree(w, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--store-count", type=int, default=10000)
    a = ap.parse_args()
    d = os.path.abspath(a.dir)
    store = os.path.join(d, f"store-{a.store_count}")
    done = os.path.join(store, ".complete")
    have = all(os.path.exists(os.path.join(d, f)) for f in ("ecdsa.pem", "rsa.pem", "ca-ecdsa.pem"))
    if have and os.path.exists(done):
        print(store)
        return
    # The store's leaves are signed by the ECDSA CA: a new CA means a new store too.
    shutil.rmtree(store, ignore_errors=True)
    for f in os.listdir(d) if os.path.isdir(d) else []:
        if f.startswith("store-"):
            shutil.rmtree(os.path.join(d, f), ignore_errors=True)
    os.makedirs(store)
    try:
        import cryptography  # noqa: F401
        maker, how = with_cryptography, "python cryptography"
    except ImportError:
        maker, how = with_openssl, "openssl x509 -req per name (slow)"
    print(f"tls_certs.py: making CAs, 2 bundles and {a.store_count} store bundles in {d} ({how})", file=sys.stderr)
    maker(d, a.store_count, store)
    write_atomic(done, f"{a.store_count}\n".encode())
    print(store)


if __name__ == "__main__":
    main()
