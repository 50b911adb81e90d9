"""The local S3 server does what S3 does where the lake depends on it: it checks signatures, it
honours put-if-absent on a PUT and on a multipart completion, and its objects outlive it.

Requests are signed by hand (tests/s3_server.py, ``signed_request``), so each is exactly the one
the test means, with nothing retried.
"""

from __future__ import annotations

import re
import secrets

from s3_server import running_s3_server, signed_request


def key() -> str:
    return f"server-test/{secrets.token_hex(4)}/_delta_log/00000000000000000412.json"


def test_a_put_signed_with_a_wrong_secret_is_refused_and_writes_nothing(s3_server):
    name = key()
    status, answer = signed_request(s3_server, "PUT", name, b"forged", secret="0" * 40)
    assert (status, b"<Code>SignatureDoesNotMatch</Code>" in answer) == (403, True)
    assert signed_request(s3_server, "GET", name)[0] == 404
    # The same request with the right secret is taken.
    assert signed_request(s3_server, "PUT", name, b"signed")[0] == 200
    assert signed_request(s3_server, "GET", name) == (200, b"signed")


def test_put_if_absent_refuses_a_second_create_and_keeps_the_first(s3_server):
    name, create = key(), {"If-None-Match": "*"}
    assert signed_request(s3_server, "PUT", name, b"first", headers=create)[0] == 200
    status, answer = signed_request(s3_server, "PUT", name, b"second", headers=create)
    assert (status, b"<Code>PreconditionFailed</Code>" in answer) == (412, True)
    assert signed_request(s3_server, "GET", name) == (200, b"first")


def complete_multipart(settings: dict, name: str, body: bytes) -> tuple[int, bytes]:
    """Upload ``body`` as one part and complete the upload with If-None-Match: *."""
    status, answer = signed_request(settings, "POST", name, query="uploads")
    assert status == 200, answer
    upload = re.search(rb"<UploadId>([^<]+)</UploadId>", answer)[1].decode()
    query = f"partNumber=1&uploadId={upload}"
    status, _ = signed_request(settings, "PUT", name, body, query=query)
    assert status == 200
    # ETag of the part: the MD5 of its bytes, which the completion must name.
    import hashlib

    parts = (
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
        f'<ETag>"{hashlib.md5(body).hexdigest()}"</ETag></Part></CompleteMultipartUpload>'
    ).encode()
    headers = {"If-None-Match": "*"}
    return signed_request(settings, "POST", name, parts, f"uploadId={upload}", headers)


def test_a_multipart_completion_with_if_none_match_creates_once(s3_server):
    name = key()
    assert complete_multipart(s3_server, name, b"first upload")[0] == 200
    status, answer = complete_multipart(s3_server, name, b"second upload")
    assert (status, b"<Code>PreconditionFailed</Code>" in answer) == (412, True)
    assert signed_request(s3_server, "GET", name) == (200, b"first upload")


def test_objects_outlive_the_server(tmp_path):
    keys = ("LHTEST" + secrets.token_hex(6).upper(), secrets.token_hex(20))
    name = key()
    with running_s3_server(tmp_path, keys) as settings:
        assert signed_request(settings, "PUT", name, b"kept")[0] == 200
    assert (tmp_path / "data" / "lakehouse" / name).read_bytes() == b"kept"
    with running_s3_server(tmp_path, keys) as settings:
        assert signed_request(settings, "GET", name) == (200, b"kept")
