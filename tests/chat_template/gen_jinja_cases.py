#!/usr/bin/env python3
"""Expected renderings of jinja_cases.json from the real Jinja2 (Debian
python3-jinja2), configured as transformers renders chat templates
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, tojson with ensure_ascii=False).

  gen_jinja_cases.py            print the cases (to regenerate the golden)
  gen_jinja_cases.py --check F  exit 1 if F differs from what Jinja2 renders
                                now, 77 (skip) without python3-jinja2
"""
import json
import sys

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python3-jinja2 is not installed", file=sys.stderr)
    sys.exit(77)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
env.globals["raise_exception"] = raise_exception
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Hi <think>x</think> there\n"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\nok"}]
VARIABLES = {"messages": msgs, "add_generation_prompt": True, "bos_token": "<s>", "n": 7, "xs": [3, 1, 2], "d": {"b": 1, "a": [True, None, 1.5, "q\"\n"]}}
cases = [
 ("text and whitespace control", "a  {{- ' b ' -}}  c\n{% if true %}\n  x\n{% endif %}\nend\n"),
 ("lstrip_blocks and trim_blocks", "line\n    {% for m in messages %}\n[{{ m.role }}]\n    {% endfor %}\ndone"),
 ("loop variables", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}"),
 ("loop filter, else, break, continue", "{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
 ("namespace and reverse slice", "{% set ns = namespace(last=-1, hit=false) %}{% for m in messages[::-1] %}{% set i = (messages|length - 1) - loop.index0 %}{% if m.role == 'user' and not ns.hit %}{% set ns.last = i %}{% set ns.hit = true %}{% endif %}{% endfor %}{{ ns.last }},{{ ns.hit }}"),
 ("string methods", "{% set c = messages[2].content %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ c.startswith('<think>') }}{{ c.endswith(('k', 'no')) }}"),
 ("filters", "{{ messages[1].content | trim }}|{{ xs | length }}|{{ 'AbC' | lower }}{{ 'abc' | upper }}|{{ xs | join('-') }}|{{ xs | first }}{{ xs | last }}|{{ undefined_var | default('dflt') }}|{{ xs | reverse | list }}|{{ 'a-b' | replace('-', '+') }}|{{ d | tojson }}|{{ d.a | tojson(indent=2) }}"),
 ("tests and operators", "{{ n is defined }}{{ q is defined }}{{ none is none }}{{ 'x' is string }}{{ n is number }}{{ n is odd }}{{ d is mapping }}{{ n is not string }}|{{ n // 2 }} {{ n % 3 }} {{ -n // 2 }} {{ n / 2 }} {{ 2 ** 10 }} {{ n ~ 'x' }} {{ 'ab' in 'cabd' }} {{ 2 in xs }} {{ 5 not in xs }} {{ 'a' in d }}"),
 ("conditional expression and precedence", "{{ 'yes' if n > 3 else 'no' }}|{{ 'a' + 'b' | upper }}|{{ not n == 7 }}|{{ n > 3 and n < 10 or false }}|{{ (1, 2)[1] }}|{{ [1, 2] + [3] }}|{{ 'x' if false }}."),
 ("set block and macro", "{% set b %}[{{ n }}]{% endset %}{{ b }}{% macro tag(name, v='d') %}<{{ name }}={{ v }}>{% endmacro %}{{ tag('a') }}{{ tag('b', v=2) }}"),
 ("output of values", "{{ none }}|{{ true }}|{{ 1.5 }}|{{ 2.0 }}|{{ xs }}|{{ d }}|{{ undefined_var }}|{{ 'q' ~ none }}"),
 ("dict methods", "{% for k, v in d.items() %}{{ k }}={{ v | length if v is iterable else v }};{% endfor %}{{ d.get('zz', 'miss') }}{{ d.keys() | list }}"),
 ("comments and dash", "a {# c #} b\n{#- c2 -#}\n c {{- n -}} d"),
 ("if, elif with a condition, else", "{% for m in messages %}{%- if m.role == 'user' %}U{%- elif m.role == 'assistant' and n > 3 %}A{% elif m.role %}[{{ m.role }}]{% else %}?{% endif %};{% endfor %}|{% if n < 0 %}neg{% elif n == 7 %}seven{% endif %}|{% if false %}x{% elif false %}y{% endif %}."),
 ("selectattr and map", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='role') | join(',') }}|{{ messages | rejectattr('role', 'eq', 'user') | list | length }}"),
]
out = []
for name, t in cases:
    r = env.from_string(t).render(**VARIABLES)
    out.append({"name": name, "template": t, "expected": r})

if len(sys.argv) == 3 and sys.argv[1] == "--check":
    with open(sys.argv[2], encoding="utf-8") as f:
        golden = json.load(f)
    if golden != {"variables": VARIABLES, "cases": out}:
        print("jinja_cases.json no longer matches Jinja2's renderings", file=sys.stderr)
        sys.exit(1)
    print(f"{len(out)} cases match")
else:
    print(json.dumps({"variables": VARIABLES, "cases": out}, ensure_ascii=False, indent=1))
