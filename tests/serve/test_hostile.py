"""Hostile grammars and schemas over a real socket (issue 37): each is a 400
whose message names the bound it passes, the server answers the next
request as before, and a text that reaches the grammar matcher's nesting
bound ends as "length", not as an error. The tiny model: what it writes
does not matter here."""
import pytest

DEEP = "root ::= " + "(" * 2000 + '"a"' + ")" * 2000
LONG_NAME = {"type": "object", "properties": {"x" * 40000: {"type": "string"}}}
HI = [{"role": "user", "content": "hi"}]
NAME_BOUND = "a property name of 40000 bytes: at most 1024 beside additional properties"


@pytest.fixture(scope="module")
def server():
    import conftest

    s = conftest.Server("--ctx", "2048", model=conftest.TINY)
    yield s
    rc, err = s.stop()
    assert rc == 0, err


@pytest.mark.parametrize("path,body,param,text", [
    ("/v1/completions", {"prompt": "x", "grammar": DEEP}, "grammar",
     "groups nested deeper than 1024 (the bound on nesting)"),
    ("/v1/completions", {"prompt": "x", "grammar": 'root ::= "\\ud800"'}, "grammar",
     "a surrogate (U+D800-U+DFFF) is not a character"),
    ("/v1/completions", {"prompt": "x", "grammar": 'root ::= [\\U0000D800-\\U0000DFFF]'}, "grammar", "a surrogate"),
    ("/v1/chat/completions", {"messages": HI, "response_format": {
        "type": "json_schema", "json_schema": {"name": "n", "schema": LONG_NAME}}}, "response_format", NAME_BOUND),
    ("/v1/chat/completions", {"messages": HI, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": LONG_NAME}}]}, "tools", NAME_BOUND),
    ("/v1/completions", {"prompt": "x", "json_schema": LONG_NAME}, "json_schema", NAME_BOUND),
])
def test_refused_with_the_bound(server, path, body, param, text):
    status, r = server.request("POST", path, {"max_tokens": 4, **body})
    assert status == 400 and r["error"]["param"] == param and text in r["error"]["message"], r
    # and the server goes on
    status, r = server.request("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 2})
    assert status == 200 and r["choices"][0]["finish_reason"] == "length", r
    assert server.p.poll() is None


def test_nesting_bound_ends_as_length(server):
    # "(" nests one level a token; the way out ("(" d0 ")") needs 41 more levels and fits only until about 470
    # deep; "(" alone (token 40 in the tiny byte-level vocabulary, biased to win) fits until 511, then nothing does
    gbnf = 'root ::= "(" root ")" | "(" d0 ")"\n' + "".join(f'd{i} ::= d{i + 1} "a"\n' for i in range(40))
    gbnf += 'd40 ::= "b"\n'
    status, r = server.request("POST", "/v1/completions", {"prompt": "x", "grammar": gbnf, "max_tokens": 900,
                                                           "temperature": 0, "logit_bias": {"40": 100}})
    assert status == 200, r
    c = r["choices"][0]
    assert c["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 511, (c["finish_reason"], r["usage"])
    assert c["text"] == "(" * 511
    status, r = server.request("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 2})
    assert status == 200, r
