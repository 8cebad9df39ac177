def bubble_fraction(p, m):
    # Mistake: the bubble ratio (idle over the ideal time) where the fraction (idle over the step) is asked
    return (p - 1) / m
