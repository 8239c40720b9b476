"""Reasoning apart from the answer (server/reasoning.c) and POST
/apply-template, through the official openai client, on the default model
(SmolLM2) under DeepSeek R1's distill template (--chat-template-file), whose
generation prompt opens <think> when chat_template_kwargs says
enable_thinking (and closes it at once otherwise). SmolLM2 never writes
</think>, so with thinking on its whole reply is reasoning (an unterminated
thought) and with it off all is content; the split itself, tags across
tokens, Harmony, is tests/test_serve_reasoning.c's on recorded replies.
/apply-template is held to jinja2's renderings recorded in
tests/data/templates/expected.json."""
import json
import os

import openai
import pytest

from conftest import Server

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "templates")
TEMPLATE = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
ASK = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def r1():
    s = Server("--parallel", "2", "--ctx", "512", "--chat-template-file", os.path.join(DATA, TEMPLATE))
    yield s
    rc, err = s.stop()
    assert rc == 0, err


def client(s):
    return openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)


def test_apply_template_is_jinja2s(r1):
    """The prompt of each recorded conversation without tools, as jinja2 rendered it (the
    recording's bos/eos tokens <s>, </s> are SmolLM2's <|im_start|>, <|im_end|> here)."""
    rec = json.load(open(os.path.join(DATA, "expected.json")))
    convs = {c["name"]: c["context"] for c in rec["conversations"]}
    results = next(t for t in rec["templates"] if t["name"] == TEMPLATE)["results"]
    checked = 0
    for r in results:
        ctx = convs[r["conv"]]
        if not ctx["add_generation_prompt"] or ctx["tools"] or "output" not in r:
            continue
        status, body = r1.request("POST", "/apply-template", {"messages": ctx["messages"]})
        assert status == 200, body
        want = r["output"].replace("<s>", "<|im_start|>").replace("</s>", "<|im_end|>")
        assert body["prompt"] == want, r["conv"]
        checked += 1
    assert checked >= 5


def test_apply_template_kwargs(r1):
    status, body = r1.request("POST", "/apply-template", {"messages": ASK})
    assert status == 200 and body["prompt"].endswith("<｜Assistant｜><think>\n</think>"), body
    status, body = r1.request("POST", "/apply-template", {"messages": ASK, **THINK})
    assert status == 200 and body["prompt"].endswith("<｜Assistant｜><think>\n"), body
    status, body = r1.request("POST", "/apply-template", {"messages": ASK, "chat_template_kwargs": [1]})
    assert status == 400 and body["error"]["param"] == "chat_template_kwargs", body


def ask(s, **extra):
    return client(s).chat.completions.create(model="m", messages=ASK, max_tokens=16, temperature=0,
                                             extra_body=extra)


def test_reasoning_apart(r1):
    # thinking on: the reply starts inside <think> and never leaves it: all reasoning
    m = ask(r1, **THINK).choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    assert reasoning and not m.content, m
    # reasoning_format none: the same text, all in content (blanks around a thought are dropped when apart)
    m_none = ask(r1, reasoning_format="none", **THINK).choices[0].message
    assert "reasoning_content" not in (m_none.model_extra or {}) and m_none.content.strip() == reasoning.strip()
    # deepseek is auto's split
    m_ds = ask(r1, reasoning_format="deepseek", **THINK).choices[0].message
    assert m_ds.model_extra["reasoning_content"] == reasoning and not m_ds.content
    # thinking off (the template closes the thought in the prompt): all content
    m_off = ask(r1).choices[0].message
    assert m_off.content and "reasoning_content" not in (m_off.model_extra or {})


def test_stream_deltas_concatenate(r1):
    whole = ask(r1, **THINK).choices[0].message
    stream = client(r1).chat.completions.create(model="m", messages=ASK, max_tokens=16, temperature=0, stream=True,
                                                extra_body=THINK)
    reasoning, content, n_reasoning = "", "", 0
    for chunk in stream:
        d = chunk.choices[0].delta
        r = (d.model_extra or {}).get("reasoning_content")
        if r:
            reasoning += r
            n_reasoning += 1
        content += d.content or ""
    assert n_reasoning > 1 and reasoning == whole.model_extra["reasoning_content"]
    assert content == (whole.content or "")


def test_reasoning_format_checked(r1):
    with pytest.raises(openai.BadRequestError) as e:
        ask(r1, reasoning_format="sideways")
    assert "reasoning_format" in str(e.value)


def test_reasoning_budget(r1):
    # 0: no thinking (enable_thinking false for the template), where chat_template_kwargs does not say
    status, body = r1.request("POST", "/apply-template", {"messages": ASK, "reasoning_budget": 0})
    assert status == 200 and body["prompt"].endswith("<think>\n</think>"), body
    m = ask(r1, reasoning_budget=0).choices[0].message
    assert m.content and "reasoning_content" not in (m.model_extra or {})
    # -1: as the model thinks
    m = ask(r1, reasoning_budget=-1, **THINK).choices[0].message
    assert m.model_extra["reasoning_content"] and not m.content
    # below -1, or not an integer: refused by name
    for bad in (-2, "8"):
        with pytest.raises(openai.BadRequestError) as e:
            ask(r1, reasoning_budget=bad)
        assert "reasoning_budget" in str(e.value)


CLOSE = "</think>\n\n"


def budgeted(s, n, **extra):
    """A reply under reasoning_budget n (SmolLM2 never closes its thought itself), with each token's text."""
    r = client(s).chat.completions.create(model="m", messages=ASK, max_tokens=32, temperature=0, logprobs=True,
                                          extra_body={**THINK, **({"reasoning_budget": n} if n is not None else {}),
                                                      **extra})
    return r, [t.token for t in r.choices[0].logprobs.content]


def check_budget(r, toks, n):
    """n tokens of thought, then the close as tokens of the reply, then the answer: the close and the answer count
    as completion tokens; reasoning_content is the thought's n tokens, content what follows the close."""
    ch = r.choices[0]
    assert r.usage.completion_tokens == len(toks)
    k = next((i for i in range(n, len(toks) + 1) if "".join(toks[n:i]) == CLOSE), None)
    assert k is not None, toks  # the close right after the n-th token
    assert "</think>" not in "".join(toks[:n]) and "</think>" not in "".join(toks[k:])  # once
    assert (ch.message.model_extra or {}).get("reasoning_content", "") == "".join(toks[:n]).strip()
    assert ch.message.content and ch.message.content == "".join(toks[k:]).lstrip()


def test_reasoning_budget_tokens(r1):
    """reasoning_budget N > 0: after N tokens of thought the engine writes </think>, and the model answers."""
    for n in (2, 7):
        r, toks = budgeted(r1, n)
        check_budget(r, toks, n)
    # a budget the reply never reaches: as without one
    r, toks = budgeted(r1, 100)
    assert "</think>" not in "".join(toks) and not r.choices[0].message.content
    # streamed: the deltas concatenate to the whole reply's fields, the forced close ending the reasoning's deltas
    whole = budgeted(r1, 7)[0].choices[0]
    stream = client(r1).chat.completions.create(model="m", messages=ASK, max_tokens=32, temperature=0, stream=True,
                                                extra_body={**THINK, "reasoning_budget": 7})
    reasoning, content, order = "", "", []
    for chunk in stream:
        d = chunk.choices[0].delta
        if (d.model_extra or {}).get("reasoning_content"):
            reasoning += d.model_extra["reasoning_content"]
            order.append("r")
        if d.content:
            content += d.content
            order.append("c")
    assert reasoning == whole.message.model_extra["reasoning_content"] and content == whole.message.content
    assert "".join(order).strip("r").strip("c") == ""  # all the reasoning, then all the answer


def test_reasoning_budget_grammar(r1):
    """A schema under a budget holds the answer only: the thought is free, the close forced, the answer valid."""
    schema = {"type": "object", "properties": {"a": {"enum": [4, 5]}}, "required": ["a"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    r = client(r1).chat.completions.create(model="m", messages=ASK, max_tokens=40, temperature=0, logprobs=True,
                                          response_format=fmt, extra_body={**THINK, "reasoning_budget": 5})
    ch = r.choices[0]
    toks = [t.token for t in ch.logprobs.content]
    assert ch.finish_reason == "stop" and json.loads(ch.message.content)["a"] in (4, 5), ch
    assert "".join(toks[5:]).startswith(CLOSE) and ch.message.model_extra["reasoning_content"] == "".join(toks[:5]).strip()


def test_reasoning_budget_default():
    """--reasoning-budget N: the budget of requests that give none; theirs stands (-1: unlimited)."""
    s = Server("--parallel", "1", "--ctx", "512", "--reasoning-budget", "4", "--chat-template-file",
               os.path.join(DATA, TEMPLATE))
    try:
        r, toks = budgeted(s, None)
        check_budget(r, toks, 4)
        r, toks = budgeted(s, -1)
        assert "</think>" not in "".join(toks) and not r.choices[0].message.content
    finally:
        rc, err = s.stop()
    assert rc == 0, err


def test_cli_reasoning(tmp_path):
    """`run --chat` under a template that opens <think>: the thought apart (not dim: not a terminal),
    as written with --reasoning-format none, left out with --hide-reasoning."""
    import subprocess
    from conftest import BIN
    tmpl = tmp_path / "think.jinja"
    tmpl.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")

    def run(*flags):
        r = subprocess.run([BIN, "run", "--chat", "-p", "What is 2+2?", "-n", "12", "--chat-template-file", str(tmpl),
                            *flags], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    apart, inline, hidden = run(), run("--reasoning-format", "none"), run("--hide-reasoning")
    assert apart.strip() and apart.strip() == inline.strip() and "\033" not in apart
    assert hidden.strip() == ""  # SmolLM2 never closes the thought: nothing of an answer
    # --reasoning-budget N: the close written after N tokens of thought, then the answer (as the server's)
    inline = run("--reasoning-format", "none", "--reasoning-budget", "3", "-n", "20")
    thought, _, answer = inline.partition("</think>")
    assert thought.strip() and answer.strip() and "</think>" not in answer, inline
    hidden = run("--hide-reasoning", "--reasoning-budget", "3", "-n", "20")
    assert hidden.strip() == answer.strip()
    apart = run("--reasoning-budget", "3", "-n", "20")
    assert apart.strip() == thought.strip() + "\n\n" + answer.strip()
    r = subprocess.run([BIN, "run", "--chat", "-p", "x", "--reasoning-format", "sideways"], capture_output=True, text=True)
    assert r.returncode != 0 and "--reasoning-format" in r.stderr


def test_grammar_after_the_thought(r1):
    """A JSON answer asked of a reply that starts inside <think>: the thought is free text (the grammar
    waits for </think>, which SmolLM2 never writes); without thinking the content is JSON from its first byte."""
    fmt = {"type": "json_object"}
    think = client(r1).chat.completions.create(model="m", messages=ASK, max_tokens=12, temperature=0,
                                               response_format=fmt, extra_body=THINK).choices[0]
    reasoning = think.message.model_extra["reasoning_content"]
    assert reasoning and not reasoning.lstrip().startswith("{") and not think.message.content
    plain = client(r1).chat.completions.create(model="m", messages=ASK, max_tokens=12, temperature=0,
                                               response_format=fmt).choices[0]
    assert plain.message.content.lstrip().startswith("{") and "reasoning_content" not in (plain.message.model_extra or {})


def test_responses_reasoning_item(r1):
    """The Responses API: the thought as a reasoning item before the message, whole and streamed."""
    c = client(r1)
    r = c.responses.create(model="m", input="What is 2+2?", max_output_tokens=8, temperature=0, extra_body=THINK)
    kinds = [o.type for o in r.output]
    assert kinds == ["reasoning", "message"], kinds
    text = r.output[0].content[0].text
    assert text and r.output[1].content[0].text == ""
    deltas = [e.delta for e in c.responses.create(model="m", input="What is 2+2?", max_output_tokens=8, temperature=0,
                                                  stream=True, extra_body=THINK)
              if e.type == "response.reasoning_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == text


def test_anthropic_thinking_block(r1):
    """Anthropic's Messages API: thinking enabled is the template's enable_thinking; the thought a thinking block."""
    import anthropic
    a = anthropic.Anthropic(base_url=r1.url, api_key="unused", max_retries=0)
    kw = dict(model="m", max_tokens=8, extra_body={"temperature": 0}, messages=[{"role": "user", "content": "What is 2+2?"}],
              thinking={"type": "enabled", "budget_tokens": 1024})
    m = a.messages.create(**kw)
    assert [b.type for b in m.content] == ["thinking", "text"] and m.content[0].thinking
    with a.messages.stream(**kw) as s:
        streamed = "".join(e.delta.thinking for e in s if e.type == "content_block_delta" and e.delta.type == "thinking_delta")
    assert streamed == m.content[0].thinking
    off = a.messages.create(**{**kw, "thinking": {"type": "disabled"}})
    assert [b.type for b in off.content] == ["text"] and off.content[0].text
    # budget_tokens is reasoning_budget: the thought closed after that many tokens, the answer a text block
    m = a.messages.create(**{**kw, "max_tokens": 32, "thinking": {"type": "enabled", "budget_tokens": 7}})
    want = budgeted(r1, 7)[0].choices[0].message
    assert [b.type for b in m.content] == ["thinking", "text"], m.content
    assert m.content[0].thinking == want.model_extra["reasoning_content"] and m.content[1].text == want.content
