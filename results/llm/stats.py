# Counts of one measured run folder (results/llm/run.sh): answers, programs, valid ones, calibrations, idle time.
import json, sys, statistics
d = sys.argv[1]
lines = [json.loads(l) for l in open(d + '/cache.jsonl')]
s = json.load(open(d + '/run/summary.json'))
ev = [json.loads(l) for l in open(d + '/run/events.jsonl')]
answers = len(lines)
found = sum(1 for l in lines if l.get('src')) + sum(len(l.get('more', [])) for l in lines)
valid = sum(1 for l in lines if l.get('verdict') == 'valid') + sum(len(l.get('more', [])) for l in lines)
salv = sum(1 for l in lines if l.get('salvaged'))
def names_x(src):
    import re
    return re.search(r'\bx\b', src) is not None
validx = sum(1 for l in lines if l.get('verdict') == 'valid' and names_x(l['src'])) + sum(1 for l in lines for m in l.get('more', []) if names_x(m['src']))
llm_srcs = set([l['src'] for l in lines if l.get('src')] + [m['src'] for l in lines for m in l.get('more', [])])
cal = [e for e in ev if e['src'] in llm_srcs]
scored = sum(1 for e in cal if e.get('validation_r2') is not None and e['status'] == 'ok')
lat = statistics.median([l['latency_ms'] for l in lines]) / 1000 if lines else None
r = s['run']; l = r.get('llm', {})
print(json.dumps({
  'run': d.split('/')[-1], 'answers': answers, 'programs_found': found, 'valid': valid, 'salvaged': salv,
  'valid_naming_x': validx, 'calibrated': len(cal), 'scored': scored,
  'best_llm_r2': max([e['validation_r2'] for e in cal if e.get('validation_r2') is not None], default=None),
  'median_latency_s': lat, 'stop': s['stop'], 'calibrations': s['calibrations'],
  'best_r2': s['best']['validation_r2'] if s.get('best') else None,
  'idle_s': round(r.get('calibrator_idle_s', 0), 1), 'thread_s': round(r['threads'] * r['elapsed_s'], 1),
  'requests': l.get('requests'), 'candidates_from_llm': l.get('candidates'),
  'tokens': l.get('usage'),
}))
