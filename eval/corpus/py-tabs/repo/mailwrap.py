"""Word wrapping for plain-text mail."""


def wrap(text, width=72):
	"""The words of text in lines of at most width characters.

	A word longer than width gets a line of its own.
	"""
	lines, line = [], ""
	for word in text.split():
		if not line:
			line = word
		elif len(line) + 1 + len(word) < width:
			line += " " + word
		else:
			lines.append(line)
			line = word
	if line:
		lines.append(line)
	return lines
